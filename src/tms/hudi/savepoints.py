"""Savepoints (Hudi's `savepoint` action): a completed write's file slices kept from the
cleaner, so a reader can read the table as of that instant for as long as it stands.

Made and removed as Hudi's `SavepointActionExecutor` and `SavepointHelpers` do: the instant
must be a completed commit, delta commit or replacecommit no older than the earliest commit
the last clean retained (older files may be gone); `<ts>.savepoint.inflight` (empty), then the
completed `<ts>.savepoint` holding `HoodieSavepointMetadata`: per partition, the names of the
base and log files of the latest file slices as of the instant. Removing one deletes its
completed file, then its inflight one. The metadata table is not written, as Hudi writes none
for a savepoint. Both hold the table lock the writers use, so that no clean plans between the
files read and the savepoint written."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from tms.hudi.avro import codec as avro_codec
from tms.hudi.errors import SavepointRefusedError
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State, is_instant_time
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline
from tms.hudi.timeline.transitions import instant_file, transition

__all__ = ["Savepoint", "create_savepoint", "delete_savepoint", "list_savepoints"]

SAVEPOINT_VERSION = 1


@dataclass(frozen=True)
class Savepoint:
    """A completed savepoint as its metadata describes it."""

    instant_time: str
    savepointed_by: str
    savepointed_at: int
    """Epoch milliseconds when it was made."""
    comments: str
    partitions: int
    files: int
    """Base and log files it keeps from the cleaner."""
    completion_time: str | None = None


def list_savepoints(table: HudiTable, timeline: Timeline | None = None) -> list[Savepoint]:
    """The table's completed savepoints, oldest first."""
    timeline = timeline or table.timeline()
    return [_savepoint(timeline, i) for i in timeline.completed((Action.SAVEPOINT,))]


def create_savepoint(
    table: HudiTable, instant_time: str, *, user: str, comment: str = ""
) -> tuple[Savepoint, bool]:
    """Savepoint the completed write at `instant_time`; the savepoint and whether this call
    made it (False: it stood already, and is returned as it is). `SavepointRefusedError`
    names why an instant cannot be savepointed."""
    if not is_instant_time(instant_time):
        raise SavepointRefusedError(f"{instant_time!r} is not an instant time")
    with table.lock.hold(table.storage):
        timeline = table.timeline()
        existing = _completed_savepoint(timeline, instant_time)
        if existing is not None:
            return _savepoint(timeline, existing), False
        _check_savepointable(timeline, instant_time)
        files = _latest_files_as_of(table, timeline, instant_time)
        metadata = {
            "savepointedBy": user,
            "savepointedAt": int(time.time() * 1000),
            "comments": comment,
            "partitionMetadata": {
                partition: {"partitionPath": partition, "savepointDataFile": names}
                for partition, names in sorted(files.items())
            },
            "version": SAVEPOINT_VERSION,
        }
        inflight = Instant(instant_time, Action.SAVEPOINT, State.INFLIGHT)
        table.storage.write_bytes(instant_file(table.config, inflight), b"")
        completed = transition(
            table.storage,
            table.config,
            inflight,
            State.COMPLETED,
            avro_codec.encode("HoodieSavepointMetadata", metadata),
        )
    if table.config.timeline_layout_version < 2:  # layout 1 records no completion time
        completed = completed.with_state(State.COMPLETED, None)
    return _of_metadata(completed, metadata), True


def delete_savepoint(table: HudiTable, instant_time: str) -> bool:
    """Remove the savepoint at `instant_time`: its completed file, then its inflight one;
    False when there is none (nothing is written)."""
    with table.lock.hold(table.storage):
        timeline = table.timeline()
        if _completed_savepoint(timeline, instant_time) is None:
            return False
        states = timeline.files.get((instant_time, Action.SAVEPOINT), {})
        for state in (State.COMPLETED, State.INFLIGHT, State.REQUESTED):
            path = states.get(state)
            if path is not None:
                table.storage.delete(path)
        return True


def _completed_savepoint(timeline: Timeline, instant_time: str) -> Instant | None:
    found = [i for i in timeline.completed((Action.SAVEPOINT,)) if i.requested_time == instant_time]
    return found[0] if found else None


def _savepoint(timeline: Timeline, instant: Instant) -> Savepoint:
    return _of_metadata(instant, timeline.avro_details(instant, State.COMPLETED) or {})


def _of_metadata(instant: Instant, metadata: dict[str, Any]) -> Savepoint:
    """The savepoint a completed instant and its `HoodieSavepointMetadata` describe."""
    partitions = metadata.get("partitionMetadata") or {}
    return Savepoint(
        instant_time=instant.requested_time,
        savepointed_by=str(metadata.get("savepointedBy") or ""),
        savepointed_at=int(metadata.get("savepointedAt") or 0),
        comments=str(metadata.get("comments") or ""),
        partitions=len(partitions),
        files=sum(len(p.get("savepointDataFile") or []) for p in partitions.values()),
        completion_time=instant.completion_time,
    )


def _check_savepointable(timeline: Timeline, instant_time: str) -> None:
    """Hudi's rules: a completed write, not older than the earliest commit the last clean
    (completed or pending) retained, else than the first completed write."""
    writes = timeline.completed(WRITE_COMMIT_ACTIONS)
    if not any(i.requested_time == instant_time for i in writes):
        raise SavepointRefusedError(
            f"{instant_time} is not a completed commit, delta commit or replacecommit on the "
            "active timeline; only a completed write can be savepointed"
        )
    retained = _earliest_retained(timeline) or min(i.requested_time for i in writes)
    if instant_time < retained:
        raise SavepointRefusedError(
            f"{instant_time} is older than {retained}, the earliest commit the last clean "
            "retained: its files may be cleaned already; savepoint a later instant"
        )


def _earliest_retained(timeline: Timeline) -> str | None:
    cleans = [i for i in timeline.instants if i.action is Action.CLEAN]
    if not cleans:
        return None
    last = cleans[-1]
    if last.is_completed:
        return str(timeline.clean_metadata(last).get("earliestCommitToRetain") or "") or None
    plan = timeline.avro_details(last, State.REQUESTED) or {}
    earliest = plan.get("earliestInstantToRetain") or {}
    return str(earliest.get("timestamp") or "") or None


def _latest_files_as_of(
    table: HudiTable, timeline: Timeline, instant_time: str
) -> dict[str, list[str]]:
    """Per partition, the base and log file names of the latest file slices as of
    `instant_time`: the view of a timeline of the instants requested by then."""
    as_of = dataclasses.replace(
        timeline,
        instants=tuple(i for i in timeline.instants if i.requested_time <= instant_time),
    )
    view = table.file_system_view(as_of)
    files: dict[str, list[str]] = {partition: [] for partition in view.partitions}
    for piece in view.latest_file_slices():
        names = files.setdefault(piece.partition_path, [])
        if piece.base_file is not None:
            names.append(piece.base_file.file_name)
        names += [log.file_name for log in piece.log_files]
    return files
