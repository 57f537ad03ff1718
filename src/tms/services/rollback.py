"""Rolling back what a failed or crashed instant left: files named by its markers.

A pending compaction or clustering goes back to requested (its plan is kept and can run
again); a pending write is removed from the timeline. Either way a completed rollback
instant records what was deleted, as Hudi does. Markers naming a file outside the table (or in
`.hoodie/`) are refused by `list_markers` before the rollback instant is requested; a file a
marker names is deleted only when it says the instant wrote it (`tms.hudi.files.marked_files`),
so markers planted for committed files delete nothing. An
instant whose heartbeat is alive belongs to a running job and is left alone.

On a table with a metadata table, the metadata table's delta commit of the instant (inflight
or completed: the crash may have come before the data instant completed) is rolled back
first, as Hudi 1.x's metadata writer does when the data table rolls back an instant; the
data table's rollback itself writes nothing to the metadata table.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tms.hudi.actions import PLANNED_ACTIONS
from tms.hudi.errors import InstantInFlightError, TableNotFoundError
from tms.hudi.files.marked_files import sort_marked_files
from tms.hudi.files.markers import delete_markers, list_markers
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.rollback import rollback_delta_commit
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.rollback_instant import RollbackInstant
from tms.hudi.timeline.timeline import Timeline
from tms.hudi.timeline.transitions import delete_pending, new_instant_time, revert_to_requested

KEEPS_PLAN = frozenset({*map(Action, PLANNED_ACTIONS), Action.REPLACE_COMMIT})
"""Timeline actions whose plan outlives a rollback (the planned table services, clustering
also under the `replacecommit` older tables give it): the instant goes back to requested,
not away."""


@dataclass(frozen=True)
class RollbackResult:
    rollback_instant: str
    rolled_back: str
    deleted_files: tuple[str, ...]
    foreign_markers: int = 0
    """Markers naming files the instant did not write: left alone."""


def rollback_inflight(
    table: HudiTable,
    instant: Instant,
    *,
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
    tolerable_misses: int = heartbeat.DEFAULT_TOLERABLE_MISSES,
    timeline: Timeline | None = None,
    keep_plan: bool = False,
) -> RollbackResult:
    """Undo an inflight instant; table services go back to requested, writes disappear.
    `keep_plan`: a log compaction goes back to requested too (tms's own executor runs it
    again: the rollback deleted its files, no command block voids its instant), where by
    default it goes, as Hudi's code rolls it back."""
    storage, config = table.storage, table.config
    ts = instant.requested_time
    if heartbeat.is_alive(storage, ts, heartbeat_interval, tolerable_misses):
        raise InstantInFlightError(
            f"instant {ts} has a live heartbeat (a job is running it); not rolling back"
        )
    timeline = timeline or table.timeline()
    _rollback_metadata_delta_commit(table, ts)
    marked = sort_marked_files(storage, ts, list_markers(storage, ts))
    by_partition: dict[str, list[str]] = defaultdict(list)
    for marker in marked.owned:
        by_partition[marker.partition_path].append(marker.data_file_path)
    rollback = RollbackInstant(
        storage,
        config,
        new_instant_time(timeline.instants),
        (ts, instant.action),
        dict(by_partition),
    )
    rollback.start()
    rollback.delete_files()
    if keep_plan or timeline.origin_action(instant) in KEEPS_PLAN:
        revert_to_requested(storage, config, instant)
    else:
        delete_pending(storage, config, instant)
    rollback.complete()
    delete_markers(storage, ts)
    heartbeat.stop_heartbeat(storage, ts)
    return RollbackResult(rollback.rollback_time, ts, tuple(rollback.deleted), len(marked.foreign))


def _rollback_metadata_delta_commit(table: HudiTable, instant_time: str) -> None:
    if not table.config.metadata_partitions:
        return
    try:
        reader = MetadataTableReader.open(table.storage, table.config)
    except TableNotFoundError:
        return
    if reader.timeline.get(instant_time) is not None:
        rollback_delta_commit(table.storage, instant_time, reader=reader)
