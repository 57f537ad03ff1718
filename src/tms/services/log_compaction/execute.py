"""tms's own executor of log compaction plans (Hudi's `logcompaction`, RFC-48), after Hudi's
`RunCompactionActionExecutor` with `LogCompactionExecutionHelper`.

Each operation's log files (not its base file) are merged by one Spark task into one new log
file of the same file group and slice, as Hudi 1.2's log compaction append handle
(`HoodieAppendHandle` in its log compaction role, over its file group reader) writes it, which
the tests compare with Hudi's own on twin tables:

- named as a delta commit names a log file in that slice (`tms.hudi.files.new_log_file`): from
  table version 8 by the log compaction's instant, version 1, with the task's write token; in
  version 6 by the slice's base instant at the next version, with the write token of the log
  file it rolls over from (Hudi's log writer keeps it);
- Avro data blocks of the merged records (the commit time the log compaction's, the sequence
  number `<instant>_<task partition>_<n>`, the file name field the file id), then one delete
  block of the keys whose last word is a delete, each block headed by `INSTANT_TIME` (the log
  compaction), `SCHEMA` (the table's, with meta fields) and `COMPACTED_BLOCK_TIMES` (the
  instants the blocks stand for, as Hudi's log record reader finds them, oldest first as
  Hudi 1.2 writes them): readers then skip the blocks they stand for;
- the instant completes as `<ts>.deltacommit` marked compacted, operation type `LOG_COMPACT`,
  with the table's schema, the plan's extra metadata and the new log files' delta write stats
  (`CompactHelpers.createCompactionMetadata`; previous commit the slice's base instant); the
  metadata table's `files` partition gets the new log files in a delta commit of the same
  instant (`HoodieTableMetadataUtil`'s files records of a delta commit).

Native declines, before anything is written, what it cannot keep as Hudi keeps it (`declines`):
metadata table partitions other than `files` (Hudi writes column stats of a log file from its
records, and index updates, which tms does not write for log files), tables without meta
fields, CDC, and whatever keeps tms's other services off the table. `auto` then runs Hudi's
code.

A task holds its slice's log records in memory: slices whose log files take more than the
task's memory budget / `EXPANSION` stop the task with `TaskMemoryExceeded` before anything is
written (the compaction's in-memory path; its bucketed spilling is not applied here). A run a crash
or a failure left inflight is rolled back as a compaction is, back to its plan, and run again
under its instant: tms's rollback deletes the files the run wrote (named by its markers) and
writes no command block that would void blocks of that instant. Hudi's code instead rolls a
log compaction back with its plan (`apache_hudi.log_compactor`): its rollback of a version 6
table's log files appends such command blocks.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.schema import arrow_schema_from_avro, with_meta_fields
from tms.hudi.avro.write_stat import RuntimeStats, WriteStat
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.compaction_operation import CompactionOperation
from tms.hudi.files.data import read_log_file
from tms.hudi.files.fs_view import FileSlice, LogFile
from tms.hudi.files.log_block import HeaderKey
from tms.hudi.files.log_writer import encode_avro_data_block, encode_delete_block
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.names import LogFileName
from tms.hudi.files.new_log_file import next_log_file_name
from tms.hudi.files.spilled_slice import EXPANSION
from tms.hudi.memory import TaskMemoryExceeded
from tms.hudi.merge_config import record_merging
from tms.hudi.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME
from tms.hudi.metadata.partitions import FILES
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.table_paths import TablePaths
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.layout import TimelineLayout
from tms.hudi.timeline.timeline import Timeline
from tms.services.compaction.plan import operation_from_avro
from tms.services.compaction.strategy import TOTAL_LOG_FILES_SIZE
from tms.services.conflicts import ConflictCheck
from tms.services.execution import (
    ServiceResult,
    cancel_requested_in_task,
    conflict_in_task,
)
from tms.services.log_compaction.merge import MergedLogs, merge_log_blocks, valid_block_instants
from tms.services.metadata_sync import WrittenFile
from tms.services.plan_executor import CommitActionExecutor, ExecutionContext
from tms.services.spark import TaskInfo
from tms.services.table_refusals import refusals_beside_log_compactions
from tms.spark_runtime.task_memory import DEFAULT_RECORDS, REMEDY

__all__ = [
    "LOG_COMPACT_OPERATION",
    "LogCompactionExecutor",
    "declines",
    "log_compaction_header",
    "log_compaction_metadata",
]

LOG_COMPACT_OPERATION = "LOG_COMPACT"
"""The operation type of a completed log compaction (`WriteOperationType.LOG_COMPACT`)."""
CDC_ENABLED = "hoodie.table.cdc.enabled"


def declines(table: HudiTable, timeline: Timeline | None = None) -> list[str]:
    """Why tms's own executor cannot log-compact `table` as Hudi does; empty when it can.
    Each reason says what to do: Hudi's code runs it (executor auto or hudi)."""
    timeline = timeline or table.timeline()
    config = table.config
    reasons = refusals_beside_log_compactions(table, timeline)
    beyond_files = [p for p in config.metadata_partitions if p != FILES]
    if beyond_files:
        reasons.append(
            f"metadata table partitions {', '.join(beyond_files)} get entries of a log "
            "compaction's new log files (column stats of its records, index updates) that tms "
            "does not write as Hudi does: Hudi's code runs it (executor auto or hudi)"
        )
    if not config.populate_meta_fields:
        reasons.append(
            "the table stores no meta fields (virtual keys): Hudi's code runs its log "
            "compaction (executor auto or hudi)"
        )
    if config.get(CDC_ENABLED, "false").lower() == "true":
        reasons.append(
            "the table logs changes (CDC): Hudi's code runs its log compaction (executor auto "
            "or hudi)"
        )
    if not timeline.latest_schema():
        reasons.append(
            "no completed commit records the table's schema to write the new log blocks "
            "under: Hudi's code runs it (executor auto or hudi)"
        )
    return reasons


def log_compaction_header(valid_instants: Sequence[str]) -> dict[HeaderKey, str]:
    """The header a log compaction adds to each block it writes (beside `INSTANT_TIME` and
    `SCHEMA`): the instants its blocks stand for, comma-separated, as Hudi joins them."""
    return {HeaderKey.COMPACTED_BLOCK_TIMES: ",".join(valid_instants)}


# Execution ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Execution:
    """What every task of one execution shares; small and picklable."""

    base_path: str
    instant_time: str
    table_version: int
    layout: TimelineLayout
    ordering_fields: tuple[str, ...]
    avro_schema: dict[str, Any]
    schema: pa.Schema
    committed: frozenset[str]
    archived_before: str
    cancellable: bool = False
    conflicts: ConflictCheck | None = None
    memory_budget: int = DEFAULT_RECORDS

    def is_committed(self, instant_time: str) -> bool:
        """Blocks count when their instant completed before the log compaction's (Hudi's
        reader reads up to the log compaction instant)."""
        if instant_time >= self.instant_time:
            return False
        return instant_time in self.committed or instant_time < self.archived_before


@dataclass(frozen=True)
class _LogCompactionPlan:
    """A pending log compaction plan as read for its execution."""

    plan: dict[str, Any]
    operations: tuple[CompactionOperation, ...]
    file_groups: frozenset[tuple[str, str]]
    avro_schema: dict[str, Any]


class LogCompactionExecutor(
    CommitActionExecutor[_LogCompactionPlan, CompactionOperation, WrittenFile | None]
):
    """Each operation's log files merged into one new log file of its slice by its own Spark
    task; the instant completes as a `<ts>.deltacommit` of operation type `LOG_COMPACT`."""

    name = Action.LOG_COMPACTION.value
    stage = "log compacting"
    plan_actions = (Action.LOG_COMPACTION,)
    conflicts_on_log_files = False
    writes_new_file_groups = False

    def refuse(self, table: HudiTable, timeline: Timeline) -> None:
        reasons = declines(table, timeline)
        if reasons:
            raise UnsupportedTableError(
                f"cannot run logcompaction with tms's own code on {table.base_path}: "
                + "; ".join(reasons)
            )

    def read_plan(
        self, table: HudiTable, timeline: Timeline, instant: Instant
    ) -> _LogCompactionPlan:
        plan = timeline.compaction_plan(instant)
        paths = TablePaths(table.storage, f"log compaction plan {instant.requested_time}")
        operations = tuple(operation_from_avro(op, paths) for op in plan.get("operations") or [])
        schema_json = timeline.latest_schema()
        assert schema_json, "declines() refuses a table without a schema"
        file_groups = frozenset((op.partition_path, op.file_id) for op in operations)
        return _LogCompactionPlan(
            plan, operations, file_groups, with_meta_fields(json.loads(schema_json))
        )

    def tasks(
        self, plan: _LogCompactionPlan, context: ExecutionContext
    ) -> Sequence[CompactionOperation]:
        return plan.operations

    def task_function(
        self, plan: _LogCompactionPlan, context: ExecutionContext
    ) -> Callable[[CompactionOperation, TaskInfo], WrittenFile | None]:
        table, timeline = context.table, context.timeline
        execution = _Execution(
            base_path=table.base_path,
            instant_time=context.instant_time,
            table_version=table.config.table_version,
            layout=TimelineLayout.of(table.config),
            ordering_fields=record_merging(table.config).compared_fields,
            avro_schema=plan.avro_schema,
            schema=arrow_schema_from_avro(plan.avro_schema),
            committed=frozenset(i.requested_time for i in timeline.completed()),
            archived_before=timeline.instants[0].requested_time if timeline.instants else "",
            cancellable=context.cancellable,
            conflicts=context.conflicts,
            memory_budget=context.memory_budget,
        )
        return functools.partial(_log_compact_slice, execution)

    def commit_metadata(
        self, plan: _LogCompactionPlan, schema: Mapping[str, str]
    ) -> CommitMetadata:
        return log_compaction_metadata(plan.plan, schema)

    def written(self, outcomes: Sequence[WrittenFile | None]) -> list[WrittenFile]:
        return [outcome for outcome in outcomes if outcome is not None]

    def totals(
        self,
        result: ServiceResult,
        plan: _LogCompactionPlan,
        outcomes: Sequence[WrittenFile | None],
    ) -> None:
        stats = [w.stat for w in self.written(outcomes)]
        result.file_groups = len(plan.operations)
        result.log_files_compacted = sum(s.total_log_files_compacted for s in stats)
        result.log_records_compacted = sum(s.total_log_records for s in stats)


def log_compaction_metadata(plan: Mapping[str, Any], schema: Mapping[str, str]) -> CommitMetadata:
    """The completed log compaction's metadata before its write stats, as Hudi's
    `CompactHelpers.createCompactionMetadata` makes it: compacted, the schema, the plan's
    extra metadata, operation type `LOG_COMPACT`."""
    metadata = CommitMetadata(
        compacted=True, operation_type=LOG_COMPACT_OPERATION, extra_metadata=dict(schema)
    )
    metadata.extra_metadata.update(plan.get("extraMetadata") or {})
    return metadata


def _log_compact_slice(
    execution: _Execution, operation: CompactionOperation, task: TaskInfo
) -> WrittenFile | None:
    """One Spark task: merge one slice's log files and write the new log file; its write
    stat. A cancel request or a conflicting write stops it before it reads anything."""
    if cancel_requested_in_task(
        execution.base_path, execution.instant_time, execution.cancellable
    ) or conflict_in_task(execution.conflicts):
        return None
    started = time.perf_counter()
    storage = Storage(execution.base_path)
    logs = _sized_logs(storage, operation.file_slice())
    _check_budget(execution, operation, logs)
    blocks = [block for log in logs for block in read_log_file(storage, log.path)]
    merged = merge_log_blocks(
        blocks,
        execution.is_committed,
        execution.ordering_fields,
        execution.schema,
        operation.partition_path,
    )
    if merged.rows.num_rows == 0 and not merged.deletes:
        return None  # nothing committed to merge: no file
    scanned = time.perf_counter()
    name, slice_logs = _new_log_file(storage, execution, operation, task)
    valid = valid_block_instants(blocks, execution.is_committed)
    content = log_file_content(execution, operation.file_id, merged, valid, task.partition_id)
    path = operation.path(str(name))
    create_marker(
        storage,
        execution.instant_time,
        Marker(operation.partition_path, str(name), MarkerType.APPEND),
    )
    storage.create_new(path, content)  # a writer rolling over to the same name fails, not lost
    write_ms = int((time.perf_counter() - scanned) * 1000)
    runtime = RuntimeStats(
        total_scan_time=int((scanned - started) * 1000), total_upsert_time=write_ms
    )
    stat = log_write_stat(
        execution, operation, name, path, len(content), merged, logs, slice_logs, runtime
    )
    return WrittenFile(stat)


def _sized_logs(storage: Storage, file_slice: FileSlice) -> list[LogFile]:
    """The plan's log files with their sizes on storage (the plan does not record them)."""
    return [replace(log, size=storage.info(log.path).size) for log in file_slice.log_files]


def _check_budget(
    execution: _Execution, operation: CompactionOperation, logs: Sequence[LogFile]
) -> None:
    """A slice whose log records do not fit the task's budget stops the task before it
    reads them (`TaskMemoryExceeded`, saying which setting to raise)."""
    needed = sum(log.size for log in logs) * EXPANSION
    if needed > execution.memory_budget:
        raise TaskMemoryExceeded(
            f"the log records of file group {operation.file_id} ({len(logs)} log files)",
            needed,
            execution.memory_budget,
            REMEDY,
        )


def _new_log_file(
    storage: Storage, execution: _Execution, operation: CompactionOperation, task: TaskInfo
) -> tuple[LogFileName, list[str]]:
    """The new log file's name and the slice's log files as Hudi's version-6 write stat names
    them (newest first). Its version is the next after every log file of its slice on
    storage, committed or not; in version 6 (a slice's log files named by its base instant)
    Hudi's log writer rolls over from the latest log file keeping its write token, so the new
    file takes that token, and the task's own otherwise."""
    in_slice = []
    for info in storage.list_dir(operation.partition_path):
        parsed = LogFileName.parse(info.path.rsplit("/", 1)[-1])
        if parsed is not None and parsed.file_id == operation.file_id:
            in_slice.append(LogFile(parsed, info.path, info.size))
    in_slice.sort(key=lambda log: log.name.sort_key)
    current = FileSlice(
        operation.partition_path,
        operation.file_id,
        operation.base_instant_time,
        None,
        tuple(in_slice),
    )
    name = next_log_file_name(execution.layout, current, execution.instant_time, task.write_token)
    named_by_base = [
        log.name for log in in_slice if log.name.base_instant_time == operation.base_instant_time
    ]
    if execution.layout.version < 2 and named_by_base:
        name = replace(name, write_token=named_by_base[-1].write_token)
    return name, [str(log) for log in reversed(named_by_base)]


def log_file_content(
    execution: _Execution,
    file_id: str,
    merged: MergedLogs,
    valid_instants: Sequence[str],
    partition_id: int = 0,
) -> bytes:
    """The new log file: a data block of the merged records, then a delete block of the keys
    whose last word is a delete, each with the log compaction's header. The records' meta
    fields are set as Hudi 1.2's append handle sets them: the commit time the log
    compaction's, the sequence number `<instant>_<task partition>_<n>`, the file name field
    the file id."""
    header = log_compaction_header(valid_instants)
    content = b""
    rows = merged.rows
    if rows.num_rows:
        instant, count = execution.instant_time, rows.num_rows
        seqnos = [f"{instant}_{partition_id}_{n}" for n in range(1, count + 1)]
        for field, values in (
            (COMMIT_TIME, [instant] * count),
            (COMMIT_SEQNO, seqnos),
            (FILE_NAME, [file_id] * count),
        ):
            rows = rows.set_column(
                rows.schema.get_field_index(field), field, pa.array(values, pa.string())
            )
        content += encode_avro_data_block(instant, execution.avro_schema, rows, extra_header=header)
    if merged.deletes:
        ordering = execution.ordering_fields[0] if execution.ordering_fields else None
        content += encode_delete_block(
            execution.instant_time,
            execution.avro_schema,
            merged.deletes,
            ordering_field=ordering,
            extra_header=header,
        )
    return content


def log_write_stat(
    execution: _Execution,
    operation: CompactionOperation,
    name: LogFileName,
    path: str,
    size: int,
    merged: MergedLogs,
    logs: Sequence[LogFile],
    slice_logs: Sequence[str],
    runtime: RuntimeStats,
) -> WriteStat:
    """The new log file's delta write stat, as Hudi 1.2's append handle fills it in its log
    compaction role: its previous commit the slice's base instant; from table version 8 it
    names no base file and its own log file alone, in version 6 the slice's base file and log
    files. The log size compacted is the plan's metric (Hudi's reader counts the bytes of
    the blocks it read instead)."""
    v6 = execution.table_version < 8
    log_size = operation.metrics.get(TOTAL_LOG_FILES_SIZE)
    written = merged.rows.num_rows
    return WriteStat(
        file_id=operation.file_id,
        path=path,
        prev_commit=operation.base_instant_time,
        num_writes=written,
        num_deletes=len(merged.deletes),
        num_update_writes=written,
        num_inserts=0,
        total_write_bytes=size,
        partition_path=operation.partition_path,
        total_log_records=merged.log_records,
        total_log_files_compacted=len(logs),
        total_log_size_compacted=int(
            log_size if log_size is not None else sum(log.size for log in logs)
        ),
        total_updated_records_compacted=written + len(merged.deletes),
        total_log_blocks=merged.log_blocks,
        total_rollback_blocks=merged.rollback_blocks,
        file_size_in_bytes=size,
        runtime_stats=runtime,
        log_version=name.version,
        log_offset=0,
        base_file=(operation.data_file_name or "") if v6 else "",
        log_files=[*slice_logs, str(name)] if v6 else [str(name)],
        extra={"totalLogReadTimeMs": runtime.total_scan_time},
    )
