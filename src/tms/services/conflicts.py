"""Early conflict detection (RFC-56) for our compaction and clustering: other writers that
touch the file groups of our plan, found before each file group is written and again before
the plan completes.

Two kinds, as Hudi's `SimpleTransactionDirectMarkerBasedDetectionStrategy` looks for them:
- a write in flight: another instant, pending with a live heartbeat, whose markers (direct
  files, or the `MARKERS<n>` files a timeline server such as `tms` writes) name files of our
  file groups (`tms.hudi.files.write_conflicts`, the check the marker server runs too);
- a write that completed after our plan was requested and whose write stats name our file
  groups (the timeline's completion time in layout 2; in layout 1, which records none, a
  write requested after the plan).

What touches a file group depends on the service. Clustering rewrites whole file groups:
any write to one conflicts, since the replaced group would hide it. Compaction writes the
base file of a new slice: writers appending log files go to that slice (they name the
compaction instant, or complete after it), so only a write that made a new base file of a
planned group (a merge or a create) conflicts.

A plan that left the timeline while it ran conflicts before anything else: a Hudi writer
allowing updates into pending clusterings and rolling them back on conflict
(`hoodie.clustering.rollback.pending.replacecommit.on.conflict`) rolls back a pending plan,
its files included, and commits into the file groups, whoever executes it; completing the
plan then would hide that write behind a replacecommit whose files are gone
(`PlanRolledBackError`, also for a plan completed or aborted elsewhere meanwhile).

What a conflict does is the caller's (`tms.services.execution.resolve_conflicts`): a
cancellable plan is cancelled (RFC-79), one that is not waits for writes in flight and
fails, naming the writer, when a completed write conflicts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tms.hudi.errors import HudiError, PlanNotFoundError
from tms.hudi.files.markers import MarkerType, list_markers
from tms.hudi.files.names import BaseFileName
from tms.hudi.files.write_conflicts import FileGroupId, WriterConflict, marked_file_groups
from tms.hudi.locks import LockSpec
from tms.hudi.metadata.valid_instants import rolled_back_instants
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline

__all__ = [
    "Conflict",
    "ConflictCheck",
    "FileGroupId",
    "PlanRolledBackError",
    "WriteConflictError",
    "find_conflicts",
]


class WriteConflictError(HudiError):
    """Another writer writes, or wrote, a file group of a plan that is not cancellable
    after the plan was made. `retryable`: the write is still in flight, a later attempt may
    find it done; a completed one conflicts for good, since completing the plan would hide
    it. The message names the writer and the file groups."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class PlanRolledBackError(PlanNotFoundError):
    """The plan being executed is no longer pending on the timeline: another writer rolled
    it back (Hudi's writers do for clusterings in their way) or removed it. Its execution
    must not complete."""


Conflict = WriterConflict
"""Another instant touching file groups of our plan: `in_flight` for a write still running
(live heartbeat, markers), rather than a completed one."""


def find_conflicts(
    table: HudiTable,
    plan_instant: str,
    file_groups: Iterable[FileGroupId],
    *,
    any_file: bool,
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
) -> list[Conflict]:
    """Other writers' instants touching `file_groups` since the plan at `plan_instant` was
    requested; `any_file` (clustering) counts log files too, else only base files."""
    ours = set(file_groups)
    timeline = table.timeline()
    _check_still_pending(timeline, plan_instant)
    found: list[Conflict] = []
    for instant in timeline.pending_writes():
        ts = instant.requested_time
        if not heartbeat.is_alive(table.storage, ts, heartbeat_interval):
            continue
        touched = marked_file_groups(
            m
            for m in list_markers(table.storage, ts)
            if any_file or m.marker_type is not MarkerType.APPEND
        )
        if touched & ours:
            found.append(Conflict(ts, True, tuple(sorted(touched & ours))))
    for instant in _completed_since(timeline, plan_instant):
        metadata = timeline.commit_metadata(instant)
        touched = {
            (partition, stat.file_id)
            for partition, stats in metadata.partition_to_write_stats.items()
            for stat in stats
            if stat.file_id and (any_file or _is_base_file(stat.path))
        }
        if touched & ours:
            found.append(Conflict(instant.requested_time, False, tuple(sorted(touched & ours))))
    return found


def _check_still_pending(timeline: Timeline, plan_instant: str) -> None:
    """`PlanRolledBackError` when the plan completed or was aborted meanwhile, or left the
    timeline through a rollback naming it (a rollback of an earlier attempt of ours keeps
    the plan requested)."""
    instant = timeline.get(plan_instant)
    if instant is not None:
        if instant.is_pending:
            return
        how = "completed by another job" if instant.is_completed else "aborted (cancelled)"
        raise PlanRolledBackError(
            f"plan {plan_instant} was {how} meanwhile, so this execution must not complete"
        )
    rollbacks = [
        undo.requested_time
        for undo in timeline.instants
        if undo.action is Action.ROLLBACK
        and undo.requested_time > plan_instant
        and plan_instant in rolled_back_instants(timeline, undo)
    ]
    if rollbacks:
        raise PlanRolledBackError(
            f"plan {plan_instant} left the timeline while it was executed: rollback "
            f"{', '.join(rollbacks)} rolled it back (a writer that updates the file groups of "
            "pending clusterings rolls them back on conflict), so it must not complete"
        )


def _completed_since(timeline: Timeline, plan_instant: str) -> list[Instant]:
    later: list[Instant] = []
    for instant in timeline.completed(WRITE_COMMIT_ACTIONS):
        if instant.requested_time == plan_instant or timeline.is_compaction(instant):
            continue
        if timeline.is_clustering(instant):
            continue  # a table service of ours or a writer's: scheduling excludes its groups
        done = instant.completion_time or instant.requested_time
        if done > plan_instant:
            later.append(instant)
    return later


def _is_base_file(path: str | None) -> bool:
    return bool(path) and BaseFileName.parse(str(path).rsplit("/", 1)[-1]) is not None


@dataclass(frozen=True)
class ConflictCheck:
    """What an execution checks for conflicts (small and picklable: tasks run it too)."""

    base_uri: str
    plan_instant: str
    file_groups: frozenset[FileGroupId]
    any_file: bool
    cancellable: bool
    lock: LockSpec
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS

    def conflicts(self, table: HudiTable) -> list[Conflict]:
        return find_conflicts(
            table,
            self.plan_instant,
            self.file_groups,
            any_file=self.any_file,
            heartbeat_interval=self.heartbeat_interval,
        )
