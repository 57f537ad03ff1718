"""Planning a compaction of a merge-on-read table: choosing the file slices with log files and
writing `<ts>.compaction.requested` holding Hudi's `HoodieCompactionPlan` (version 2: one
operation per file slice, naming its base and log files by file name, with Hudi's metrics).
Executing the plan is `tms.services.compaction.execute`'s.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from tms.hudi.avro import codec as avro_codec
from tms.hudi.errors import CompactionConflictError, UnsupportedTableError
from tms.hudi.files.compaction_operation import CompactionOperation
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.table import HudiTable
from tms.hudi.table_paths import TablePaths
from tms.hudi.timeline.cancel_requests import with_cancellable
from tms.hudi.timeline.instant import Action, is_instant_time
from tms.hudi.timeline.timeline import Timeline
from tms.hudi.timeline.transitions import new_instant_time, request
from tms.services.compaction.strategy import CompactionStrategy, slice_metrics, strategy_by_name
from tms.services.table_refusals import ensure_supported

PLAN_VERSION = 2
"""`CompactionUtils.LATEST_COMPACTION_METADATA_VERSION`: file names, not paths, in operations."""
PENDING_WRITE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT)


def operation_of_slice(file_slice: FileSlice) -> CompactionOperation:
    """The plan operation compacting `file_slice`, with Hudi's metrics."""
    return CompactionOperation(
        partition_path=file_slice.partition_path,
        file_id=file_slice.file_id,
        base_instant_time=file_slice.base_instant_time,
        data_file_name=file_slice.base_file.file_name if file_slice.base_file else None,
        delta_file_names=tuple(log.file_name for log in file_slice.log_files),
        metrics=slice_metrics(file_slice),
    )


def operation_from_avro(record: Mapping[str, Any], paths: TablePaths) -> CompactionOperation:
    """Read a plan operation, its partition, file id and files confined to the table by
    `paths` (`UnsafePathError` otherwise); version 1 plans hold full paths, version 2
    names, and only names are kept."""
    partition = paths.partition(record.get("partitionPath") or "")
    data_file = record.get("dataFilePath")
    return CompactionOperation(
        partition_path=partition,
        file_id=paths.name(str(record["fileId"]), "file id"),
        base_instant_time=str(record["baseInstantTime"]),
        data_file_name=(
            posixpath.basename(paths.data_file(partition, data_file)) if data_file else None
        ),
        delta_file_names=tuple(
            posixpath.basename(paths.data_file(partition, p))
            for p in record.get("deltaFilePaths") or []
        ),
        metrics=dict(record.get("metrics") or {}),
    )


# Scheduling -----------------------------------------------------------------------------------


def schedule_compaction(
    table: HudiTable,
    *,
    strategy: str | CompactionStrategy = "all",
    instant_time: str | None = None,
    cancellable: bool = False,
) -> str | None:
    """Plan a compaction of the latest file slices with log files; returns its instant, or
    None when no slice needs compacting. A `cancellable` plan says so in its
    `extraMetadata` (RFC-79): a writer may cancel it until it completes.

    File groups already in a pending compaction or clustering are left out. Refused when a
    commit or delta commit is pending (its log files could be left out of the plan and then
    hidden behind the new base file), and when an explicit `instant_time` is not later than
    every completed instant and pending compaction (Hudi's rule).
    """
    chosen = strategy_by_name(strategy) if isinstance(strategy, str) else strategy
    timeline = table.timeline()
    ensure_compactable(table, timeline)
    if instant_time is None:
        instant_time = new_instant_time(timeline.instants)
    check_schedulable(timeline, instant_time)
    view = table.file_system_view(timeline)
    busy = view.pending_compaction_file_ids() | view.pending_clustering_file_ids()
    candidates = [
        s
        for s in view.latest_file_slices()
        if s.has_log_files and (s.partition_path, s.file_id) not in busy
    ]
    selected = chosen.select(candidates)
    if not selected:
        return None
    extra = with_cancellable(None, cancellable) or None
    request_plan(table, instant_time, Action.COMPACTION, selected, extra_metadata=extra)
    return instant_time


def request_plan(
    table: HudiTable,
    instant_time: str,
    action: Action,
    slices: list[FileSlice],
    *,
    extra_metadata: dict[str, str] | None = None,
    strategy: dict[str, Any] | None = None,
) -> None:
    """Write `<instant_time>.<action>.requested` holding Hudi's `HoodieCompactionPlan` of
    `slices` (a compaction's, or a log compaction's, which names its executor in
    `strategy`)."""
    plan = {
        "operations": [operation_of_slice(s).to_avro() for s in slices],
        "extraMetadata": extra_metadata,
        "version": PLAN_VERSION,
        "strategy": strategy,
        "preserveHoodieMetadata": True,
        "missingSchedulePartitions": None,
    }
    content = avro_codec.encode("HoodieCompactionPlan", plan)
    request(table.storage, table.config, instant_time, action, content)


def ensure_compactable(table: HudiTable, timeline: Timeline) -> None:
    """Compaction applies to supported merge-on-read tables only; refused otherwise."""
    if not table.config.is_merge_on_read:
        raise UnsupportedTableError(
            f"compaction applies to MERGE_ON_READ tables; {table.base_path} is "
            f"{table.config.table_type}"
        )
    ensure_supported(table, timeline)


def check_schedulable(timeline: Timeline, instant_time: str, what: str = "compaction") -> None:
    """Hudi's rule for a compaction's (or a log compaction's) instant: new, later than every
    completed instant and pending compaction, and no write pending whose log files the plan
    could miss; `CompactionConflictError` otherwise."""
    if not is_instant_time(instant_time):
        raise ValueError(f"{instant_time!r} is not an instant time (yyyyMMddHHmmssSSS)")
    if timeline.get(instant_time) is not None:
        raise CompactionConflictError(f"instant time {instant_time} is already on the timeline")
    later = [
        i
        for i in timeline.instants
        if i.requested_time > instant_time and (i.is_completed or timeline.is_compaction(i))
    ]
    if later:
        raise CompactionConflictError(
            f"cannot schedule a {what} at {instant_time}: completed instants and pending "
            f"compactions must be earlier, but these are not: {', '.join(map(str, later))}"
        )
    writes = timeline.pending(PENDING_WRITE_ACTIONS)
    if writes:
        raise CompactionConflictError(
            f"cannot schedule a {what} at {instant_time} while writes are pending (their "
            f"log files would be missed): {', '.join(map(str, writes))}; let them complete or "
            "roll them back first"
        )
