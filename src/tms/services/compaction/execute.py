"""Compaction of merge-on-read tables: each file slice's base file and log files merged into a
new base file, so readers stop merging logs at query time.

Scheduling writes `<ts>.compaction.requested` holding Hudi's `HoodieCompactionPlan` (version 2:
one operation per file slice, naming its base and log files by file name, with Hudi's metrics).
Executing runs one Spark task per operation, which writes `<fileId>_<writeToken>_<ts>.parquet`,
and completes the instant as `<ts>.commit` marked compacted. Writers keep appending while the
compaction is pending: their log files name the compaction instant, so they belong to the new
slice whose base file the compaction writes.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.schema import arrow_schema_from_avro, with_meta_fields
from tms.hudi.avro.write_stat import NULL_COMMIT, RuntimeStats, WriteStat
from tms.hudi.files.codec import HUDI_DEFAULT_CODEC, parquet_codec
from tms.hudi.files.compaction_operation import CompactionOperation
from tms.hudi.files.data import BaseFileWriter, read_footer, stored_rows, task_row_group_bytes
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.names import BaseFileName
from tms.hudi.files.spilled_slice import MergedPart, merge_file_slice
from tms.hudi.files.write_conflicts import FileGroupId
from tms.hudi.memory import TaskMemoryExceeded, task_workdir
from tms.hudi.merge_config import record_merging
from tms.hudi.meta_fields import COMMIT_TIME, RECORD_KEY
from tms.hudi.record_keys import KeyGeneration, virtual_key_generation
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.table_paths import TablePaths
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.timeline import Timeline
from tms.services.compaction.plan import (
    ensure_compactable,
    operation_from_avro,
    schedule_compaction,
)
from tms.services.compaction.strategy import TOTAL_LOG_FILES_SIZE
from tms.services.conflicts import ConflictCheck
from tms.services.execution import ServiceResult, cancel_requested_in_task, conflict_in_task
from tms.services.metadata_sync import StatsSpec, WrittenFile, file_stats
from tms.services.plan_executor import CommitActionExecutor, ExecutionContext
from tms.services.spark import TaskInfo
from tms.spark_runtime.task_memory import DEFAULT_RECORDS, REMEDY

COMPACT_OPERATION = "COMPACT"

__all__ = ["CompactionExecutor", "execute_compaction", "schedule_compaction"]


# Execution ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Execution:
    """What every task of one execution shares; small and picklable."""

    base_path: str
    instant_time: str
    ordering_fields: tuple[str, ...]
    avro_schema: dict[str, Any] | None
    schema: pa.Schema | None
    committed: frozenset[str]
    archived_before: str
    """Instants older than the active timeline's first were archived after completing."""
    keys: KeyGeneration | None = None
    """How record keys are computed for a table that stores none (virtual keys)."""
    stats: StatsSpec | None = None
    """The metadata table's column stats to compute from each new file's footer."""
    cancellable: bool = False
    """The plan may be cancelled (RFC-79): each task checks for a cancel request first."""
    conflicts: ConflictCheck | None = None
    """Other writers' conflicting writes, checked by each task of a cancellable plan."""
    memory_budget: int = DEFAULT_RECORDS
    """Bytes of records a task holds at once; a larger slice is merged through local disk."""
    codec: str = HUDI_DEFAULT_CODEC
    """The Parquet codec of the new base files (`tms.hudi.files.codec`)."""

    def is_committed(self, instant_time: str) -> bool:
        """Log blocks count when their instant completed before the compaction instant (later
        blocks belong to the compaction's own slice)."""
        if instant_time >= self.instant_time:
            return False
        return instant_time in self.committed or instant_time < self.archived_before


@dataclass(frozen=True)
class _CompactionPlan:
    """A pending compaction plan as read for its execution."""

    plan: dict[str, Any]
    operations: tuple[CompactionOperation, ...]
    file_groups: frozenset[FileGroupId]
    avro_schema: dict[str, Any] | None
    keys: KeyGeneration | None


class CompactionExecutor(
    CommitActionExecutor[_CompactionPlan, CompactionOperation, WrittenFile | None]
):
    """Each operation's file slice merged into a new base file by its own Spark task; the
    instant completes as a `<ts>.commit` marked compacted."""

    name = Action.COMPACTION.value
    stage = "compacting"
    plan_actions = (Action.COMPACTION,)
    conflicts_on_log_files = False
    writes_new_file_groups = False

    def refuse(self, table: HudiTable, timeline: Timeline) -> None:
        ensure_compactable(table, timeline)

    def read_plan(self, table: HudiTable, timeline: Timeline, instant: Instant) -> _CompactionPlan:
        plan = timeline.compaction_plan(instant)
        paths = TablePaths(table.storage, f"compaction plan {instant.requested_time}")
        operations = tuple(operation_from_avro(op, paths) for op in plan.get("operations") or [])
        schema_json = timeline.latest_schema()
        avro_schema = with_meta_fields(json.loads(schema_json)) if schema_json else None
        keys = virtual_key_generation(table.config)
        if keys is not None and avro_schema is not None:
            keys.check_field_types(arrow_schema_from_avro(avro_schema))
        file_groups = frozenset((op.partition_path, op.file_id) for op in operations)
        return _CompactionPlan(plan, operations, file_groups, avro_schema, keys)

    def tasks(
        self, plan: _CompactionPlan, context: ExecutionContext
    ) -> Sequence[CompactionOperation]:
        return plan.operations

    def task_function(
        self, plan: _CompactionPlan, context: ExecutionContext
    ) -> Callable[[CompactionOperation, TaskInfo], WrittenFile | None]:
        timeline = context.timeline
        execution = _Execution(
            base_path=context.table.base_path,
            instant_time=context.instant_time,
            ordering_fields=record_merging(context.table.config).compared_fields,
            avro_schema=plan.avro_schema,
            schema=arrow_schema_from_avro(plan.avro_schema) if plan.avro_schema else None,
            committed=frozenset(i.requested_time for i in timeline.completed()),
            archived_before=timeline.instants[0].requested_time if timeline.instants else "",
            keys=plan.keys,
            stats=context.sync.stats_spec if context.sync else None,
            cancellable=context.cancellable,
            conflicts=context.conflicts,
            memory_budget=context.memory_budget,
            codec=parquet_codec(
                context.table.storage,
                context.table.config,
                (op.path(op.data_file_name) for op in plan.operations if op.data_file_name),
            ),
        )
        return functools.partial(_compact_slice, execution)

    def commit_metadata(self, plan: _CompactionPlan, schema: Mapping[str, str]) -> CommitMetadata:
        metadata = CommitMetadata(
            compacted=True, operation_type=COMPACT_OPERATION, extra_metadata=dict(schema)
        )
        metadata.extra_metadata.update(plan.plan.get("extraMetadata") or {})
        return metadata

    def written(self, outcomes: Sequence[WrittenFile | None]) -> list[WrittenFile]:
        return [outcome for outcome in outcomes if outcome is not None]

    def totals(
        self, result: ServiceResult, plan: _CompactionPlan, outcomes: Sequence[WrittenFile | None]
    ) -> None:
        stats = [w.stat for w in self.written(outcomes)]
        result.file_groups = len(plan.operations)
        result.log_files_compacted = sum(s.total_log_files_compacted for s in stats)
        result.log_records_compacted = sum(s.total_log_records for s in stats)


execute_compaction = CompactionExecutor().execute
"""Execute a pending compaction plan on Spark and complete it as a `<ts>.commit`
(`CommitActionExecutor.execute`)."""


def _compact_slice(
    execution: _Execution, operation: CompactionOperation, task: TaskInfo
) -> WrittenFile | None:
    """One Spark task: merge one slice and write the new base file; returns its write stat
    and, for the metadata table, its column ranges. A cancel request stops it before it
    reads anything (the driver then finds the request and aborts the plan).

    The slice is merged within the task's memory budget (`merge_file_slice`: bucket by
    bucket through local disk when it is larger) and the new file written part by part."""
    if cancel_requested_in_task(
        execution.base_path, execution.instant_time, execution.cancellable
    ) or conflict_in_task(execution.conflicts):
        return None
    started = time.perf_counter()
    storage = Storage(execution.base_path)
    file_slice = operation.file_slice()
    with task_workdir() as workdir:
        merge = merge_file_slice(
            storage,
            file_slice,
            execution.ordering_fields,
            execution.is_committed,
            budget=execution.memory_budget,
            workdir=workdir,
            schema=execution.schema,
            keys=execution.keys,
        )
        writing = _SliceWriting(execution, operation, file_slice, task, storage, workdir)
        _write_parts(writing, merge.parts)
        scanned = time.perf_counter()
        if not writing.started and file_slice.base_file is None:
            return None  # a log-only slice whose records were all deleted: nothing to write
        size = writing.close()
    write_ms = int((time.perf_counter() - scanned) * 1000)
    stat = _write_stat(
        operation,
        file_slice,
        storage,
        writing,
        size=size,
        log_records=merge.log_records,
        runtime_stats=_runtime_stats(file_slice, started, scanned, write_ms),
    )
    return WrittenFile(stat, file_stats(storage, writing.path, execution.stats))


def _write_parts(writing: _SliceWriting, parts: Iterator[MergedPart]) -> None:
    """Every merged part into the new file; a task out of memory is told how to give it
    more (`REMEDY`)."""
    try:
        for part in parts:
            writing.add(part)
    except TaskMemoryExceeded as exc:
        raise exc.with_remedy(REMEDY) from None


def _runtime_stats(
    file_slice: FileSlice, started: float, scanned: float, write_ms: int
) -> RuntimeStats:
    """The task's timings as Hudi records them: writing over a base file is an upsert, a
    log-only slice's first base file a create."""
    has_base = file_slice.base_file is not None
    return RuntimeStats(
        total_scan_time=int((scanned - started) * 1000),
        total_upsert_time=write_ms if has_base else 0,
        total_create_time=0 if has_base else write_ms,
    )


def _write_stat(
    operation: CompactionOperation,
    file_slice: FileSlice,
    storage: Storage,
    writing: _SliceWriting,
    *,
    size: int,
    log_records: int,
    runtime_stats: RuntimeStats,
) -> WriteStat:
    """The new base file's write stat; the log files' size comes from the plan's metrics
    when it has them, else from storage."""
    has_base = file_slice.base_file is not None
    log_size = operation.metrics.get(TOTAL_LOG_FILES_SIZE)
    if log_size is None:
        log_size = sum(storage.info(log.path).size for log in file_slice.log_files)
    updates, inserts, deletes = writing.counts
    return WriteStat(
        file_id=operation.file_id,
        path=writing.path,
        prev_commit=operation.base_instant_time if has_base else NULL_COMMIT,
        num_writes=writing.rows,
        num_deletes=deletes,
        num_update_writes=updates,
        num_inserts=inserts,
        total_write_bytes=size,
        partition_path=operation.partition_path,
        total_log_records=log_records,
        total_log_files_compacted=len(file_slice.log_files),
        total_log_size_compacted=int(log_size),
        total_updated_records_compacted=updates + inserts + deletes,
        file_size_in_bytes=size,
        runtime_stats=runtime_stats,
    )


class _SliceWriting:
    """The new base file of one slice, written as its merged parts come: the marker and
    the file are created with the first part (a slice whose records were all deleted and
    that has no base file writes nothing)."""

    def __init__(
        self,
        execution: _Execution,
        operation: CompactionOperation,
        file_slice: FileSlice,
        task: TaskInfo,
        storage: Storage,
        workdir: str,
    ) -> None:
        self.execution = execution
        self.operation = operation
        self.storage = storage
        self.workdir = workdir
        self.file_slice = file_slice
        self.name = str(BaseFileName(operation.file_id, task.write_token, execution.instant_time))
        self.path = operation.path(self.name)
        self.writer: BaseFileWriter | None = None
        self.rows = 0
        self.counts = (0, 0, 0)

    @property
    def started(self) -> bool:
        return self.writer is not None

    def add(self, part: MergedPart) -> None:
        updates, inserts, deletes = _merge_counts(self.file_slice, part, self.execution.keys)
        self.counts = (self.counts[0] + updates, self.counts[1] + inserts, self.counts[2] + deletes)
        if part.rows.num_rows == 0:
            return
        rows = self._output_rows(part.rows)
        self._writer(rows.schema).write(rows, record_keys=part.rows.column(RECORD_KEY))
        self.rows += rows.num_rows

    def close(self) -> int:
        """Finish the file (an empty one when every record of the base file was deleted)."""
        if self.writer is None:
            self._writer(self._output_rows(self._empty_rows()).schema)
        assert self.writer is not None
        return self.writer.close()

    def _writer(self, schema: pa.Schema) -> BaseFileWriter:
        if self.writer is None:
            has_base = self.file_slice.base_file is not None
            create_marker(
                self.storage,
                self.execution.instant_time,
                Marker(
                    self.operation.partition_path,
                    self.name,
                    MarkerType.MERGE if has_base else MarkerType.CREATE,
                ),
            )
            local = f"{self.workdir}/new-{self.name}"
            self.writer = BaseFileWriter(
                self.storage,
                self.path,
                local,
                schema,
                self.execution.avro_schema,
                row_group_bytes=task_row_group_bytes(self.execution.memory_budget),
                bloom_filter=self.execution.keys is None,
                compression=self.execution.codec,
            )
        return self.writer

    def _output_rows(self, merged: pa.Table) -> pa.Table:
        return stored_rows(merged, self.name, meta_values=self.execution.keys is None)

    def _empty_rows(self) -> pa.Table:
        if self.execution.schema is not None:
            return self.execution.schema.empty_table()
        base = self.file_slice.base_file
        assert base is not None
        return read_footer(self.storage, base.path).schema.to_arrow_schema().empty_table()


def _merge_counts(
    file_slice: FileSlice, part: MergedPart, keys: KeyGeneration | None
) -> tuple[int, int, int]:
    """(updated, inserted, deleted) records of the base file among one part's keys, as
    Hudi's merge handle counts them.

    A row came from the logs when its commit time is after the slice's base instant: log
    blocks are written after the base file, whose rows are at most as recent as it. A table
    without meta fields records no commit time: every row not in the base file counts as an
    insert, and updates are not told apart from rows carried over.
    """
    merged, base_keys = part.rows, part.base_keys
    if part.carried:
        return 0, 0, 0
    if base_keys is None:
        return 0, merged.num_rows, 0
    if merged.num_rows == 0:
        return 0, 0, len(base_keys)
    in_base = pc.is_in(merged.column(RECORD_KEY), value_set=base_keys)
    if keys is None:
        from_log = pc.greater(merged.column(COMMIT_TIME), file_slice.base_instant_time)
    else:
        from_log = pc.invert(in_base)
    updates = int(pc.sum(pc.and_(from_log, in_base)).as_py() or 0)
    inserts = int(pc.sum(pc.and_(from_log, pc.invert(in_base))).as_py() or 0)
    return updates, inserts, len(base_keys) - int(pc.sum(in_base).as_py() or 0)
