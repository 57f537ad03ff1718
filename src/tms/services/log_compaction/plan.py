"""Planning a log compaction of a merge-on-read table: choosing the file slices whose log
files hold at least a threshold of blocks to merge, and writing
`<ts>.logcompaction.requested` holding Hudi's `HoodieCompactionPlan`, as Hudi's
`HoodieLogCompactionPlanGenerator` writes it (the operations a compaction plan has, the log
compaction's executor class named in its strategy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO, cast

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import LogBlock
from tms.hudi.files.log_reader import iter_log_file
from tms.hudi.files.reader import merge_order
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.hudi.timeline.timeline import Timeline
from tms.hudi.timeline.transitions import new_instant_time
from tms.planning import DEFAULT_LOG_BLOCKS_THRESHOLD
from tms.services.compaction.plan import check_schedulable, request_plan

__all__ = [
    "LOG_COMPACTION_EXECUTOR",
    "log_blocks",
    "schedule_log_compaction",
]

LOG_COMPACTION_EXECUTOR = "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"
"""The class Hudi's log compaction plans name in `strategy.compactorClassName`."""
_MERGE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.ROLLBACK)


def log_blocks(storage: Storage, file_slice: FileSlice, is_committed: Callable[[str], bool]) -> int:
    """The data and delete blocks a merge of the slice applies (a log compaction's blocks in
    place of those it stands for), from their headers alone: what Hudi's planner counts
    (`getCurrentInstantLogBlocks` of its optimised scan) against the threshold."""
    headers: list[LogBlock] = []
    for log in file_slice.log_files:
        with storage.open_ranged(log.path) as handle:
            headers += iter_log_file(cast(BinaryIO, handle), decode=False)
    return len(merge_order(headers, is_committed))


def schedule_log_compaction(
    table: HudiTable,
    *,
    log_blocks_threshold: int = DEFAULT_LOG_BLOCKS_THRESHOLD,
    instant_time: str | None = None,
) -> str | None:
    """Plan a log compaction of the latest file slices with at least `log_blocks_threshold`
    committed log blocks; returns its instant, or None when no slice has that many.

    File groups in a pending compaction, clustering or log compaction are left out, as Hudi
    leaves them out. Refused on a copy-on-write table, while a commit or delta commit is
    pending (its blocks could be left out of the plan) and for an `instant_time` that is not
    later than every completed instant and pending compaction (Hudi's rule).
    """
    if not table.config.is_merge_on_read:
        raise UnsupportedTableError(
            f"log compaction applies to MERGE_ON_READ tables; {table.base_path} is "
            f"{table.config.table_type}"
        )
    timeline = table.timeline()
    if instant_time is None:
        instant_time = new_instant_time(timeline.instants)
    check_schedulable(timeline, instant_time, "log compaction")
    selected = _due_slices(table, timeline, log_blocks_threshold)
    if not selected:
        return None
    strategy = {"compactorClassName": LOG_COMPACTION_EXECUTOR, "strategyParams": {}, "version": 1}
    request_plan(table, instant_time, Action.LOG_COMPACTION, selected, strategy=strategy)
    return instant_time


def _due_slices(table: HudiTable, timeline: Timeline, threshold: int) -> list[FileSlice]:
    """The latest file slices with at least `threshold` committed log blocks (those of
    instants up to the last completed write or rollback, as Hudi's planner scans them), but
    those of file groups a pending compaction, clustering or log compaction holds."""
    merged_up_to = max((i.requested_time for i in timeline.completed(_MERGE_ACTIONS)), default="")
    archived_before = timeline.instants[0].requested_time if timeline.instants else ""

    def is_committed(time: str) -> bool:
        return time <= merged_up_to and (timeline.is_completed(time) or time < archived_before)

    view = table.file_system_view(timeline)
    busy = (
        view.pending_compaction_file_ids()
        | view.pending_clustering_file_ids()
        | view.pending_log_compaction_file_ids()
    )
    return [
        s
        for s in view.latest_file_slices()
        if s.has_log_files
        and (s.partition_path, s.file_id) not in busy
        and log_blocks(table.storage, s, is_committed) >= threshold
    ]
