"""Clustering: many small file groups of a partition rewritten into fewer, larger ones.

Scheduling writes `<ts>.replacecommit.requested` holding Hudi's clustering plan (input groups
of file slices, as `SparkSizeBasedClusteringPlanStrategy` builds them); executing runs one Spark
task per input group, which merges its slices (base file + committed log blocks), optionally
sorts the rows, and writes new file groups, within the task's memory budget (slices merged
and rows sorted through local disk past it). The completed `<ts>.replacecommit` names the input
file groups as replaced, so readers switch to the new ones atomically.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import shutil
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.avro.schema import arrow_schema_from_avro, with_meta_fields
from tms.hudi.avro.write_stat import NULL_COMMIT, WriteStat
from tms.hudi.errors import PlanNotFoundError
from tms.hudi.files.data import ROW_GROUP_BYTES, BaseFileWriter, read_footer, stored_rows
from tms.hudi.files.external_sort import ExternalSort
from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.names import BaseFileName, LogFileName, new_file_id
from tms.hudi.files.spilled_slice import merge_file_slice
from tms.hudi.files.write_conflicts import FileGroupId
from tms.hudi.memory import TaskMemoryExceeded, task_workdir
from tms.hudi.merge_config import record_merging
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.metadata.partitions import RECORD_INDEX
from tms.hudi.metadata.record_index_logs import (
    RecordIndexLogs,
    record_index_logs,
    write_record_index_logs,
)
from tms.hudi.metadata.writer import PendingDeltaCommit
from tms.hudi.record_keys import KeyGeneration, virtual_key_generation
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.table_paths import TablePaths
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.timeline import CLUSTER_OPERATION, Timeline
from tms.services.clustering.plan import (
    FALLBACK_BYTES_PER_ROW,
    HUDI_TARGET_FILE_SIZE,
    SORT_COLUMNS_PARAM,
    TARGET_FILE_SIZE_PARAM,
    check_columns,
    schedule_clustering,
)
from tms.services.conflicts import ConflictCheck
from tms.services.execution import ServiceResult, cancel_requested_in_task, conflict_in_task
from tms.services.executor import CommitActionExecutor, ExecutionContext
from tms.services.metadata_sync import StatsSpec, WrittenFile, file_stats
from tms.services.spark import TaskInfo
from tms.spark_runtime.task_memory import DEFAULT_BUDGET, REMEDY

__all__ = ["ClusteringExecutor", "execute_clustering", "schedule_clustering"]


# Execution ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SliceInput:
    partition_path: str
    file_id: str
    base_file: str | None
    """Relative to the base path, like the log files."""
    log_files: tuple[str, ...]


@dataclass(frozen=True)
class _GroupTask:
    """Everything one Spark task needs to rewrite one clustering group (small, picklable)."""

    base_uri: str
    instant_time: str
    slices: tuple[_SliceInput, ...]
    sort_columns: tuple[str, ...]
    target_file_size: int
    ordering_fields: tuple[str, ...]
    schema_json: str | None
    completed: frozenset[str]
    earliest_active: str
    keys: KeyGeneration | None = None
    """How record keys are computed for a table that stores none (virtual keys)."""
    stats: StatsSpec | None = None
    """The metadata table's column stats to compute from each new file's footer."""
    record_index: RecordIndexLogs | None = None
    """Where to write the record index entries of the records it moves (a metadata table
    with a record index)."""
    cancellable: bool = False
    """The plan may be cancelled (RFC-79): the task checks for a cancel request first."""
    conflicts: ConflictCheck | None = None
    """Other writers' conflicting writes, checked by each task of a cancellable plan."""
    memory_budget: int = DEFAULT_BUDGET
    """Bytes of records the task holds at once; a larger group is sorted through local disk."""


@dataclass
class _GroupResult:
    written: list[WrittenFile] = field(default_factory=list)
    log_files: int = 0
    log_records: int = 0
    metadata_logs: list[WriteStat] = field(default_factory=list)
    """Record index log files written into the metadata table's pending delta commit."""


@dataclass(frozen=True)
class _ClusteringPlan:
    """A pending clustering plan as read for its execution."""

    plan: dict[str, Any]
    groups: tuple[tuple[_SliceInput, ...], ...]
    replaced: dict[str, list[str]]
    """The input file ids by partition: the file groups the replacecommit replaces."""
    file_groups: frozenset[FileGroupId]
    sort_columns: tuple[str, ...]
    target_file_size: int
    schema_json: str | None
    keys: KeyGeneration | None


class ClusteringExecutor(CommitActionExecutor[_ClusteringPlan, _GroupTask, _GroupResult]):
    """Each input group's slices merged, sorted and written as new file groups by its own
    Spark task; the completed `<ts>.replacecommit` names the input file groups replaced."""

    name = "clustering"
    stage = "clustering"
    plan_actions = (Action.REPLACE_COMMIT, Action.CLUSTERING)
    conflicts_on_log_files = True
    writes_new_file_groups = True

    def read_plan(self, table: HudiTable, timeline: Timeline, instant: Instant) -> _ClusteringPlan:
        instant_time = instant.requested_time
        if not timeline.is_clustering(instant):
            raise PlanNotFoundError(f"replacecommit {instant_time} is not a clustering plan")
        plan = timeline.clustering_plan(instant)
        params = (plan.get("strategy") or {}).get("strategyParams") or {}
        sort_columns = tuple(
            c for c in (c.strip() for c in (params.get(SORT_COLUMNS_PARAM) or "").split(",")) if c
        )
        schema_json = timeline.latest_schema()
        keys = virtual_key_generation(table.config)
        if schema_json:
            _check_schema(json.loads(schema_json), sort_columns, keys)
        paths = TablePaths(table.storage, f"clustering plan {instant_time}")
        groups = _input_groups(plan, paths)
        replaced: dict[str, list[str]] = defaultdict(list)
        for slices in groups:
            for piece in slices:
                replaced[piece.partition_path].append(piece.file_id)
        return _ClusteringPlan(
            plan=plan,
            groups=groups,
            replaced=dict(replaced),
            file_groups=frozenset((p, f) for p, ids in replaced.items() for f in ids),
            sort_columns=sort_columns,
            target_file_size=int(params.get(TARGET_FILE_SIZE_PARAM) or HUDI_TARGET_FILE_SIZE),
            schema_json=schema_json,
            keys=keys,
        )

    def begin_sync(self, context: ExecutionContext) -> PendingDeltaCommit | None:
        sync = context.sync
        if sync is None:
            return None
        return sync.begin(context.instant_time, sync.clustering_partitions())

    def tasks(self, plan: _ClusteringPlan, context: ExecutionContext) -> Sequence[_GroupTask]:
        timeline, sync, pending = context.timeline, context.sync, context.pending
        record_index = None
        if pending is not None and RECORD_INDEX in pending.partitions:
            record_index = record_index_logs(pending)
        template = _GroupTask(
            base_uri=context.table.base_path,
            instant_time=context.instant_time,
            slices=(),
            sort_columns=plan.sort_columns,
            target_file_size=plan.target_file_size,
            ordering_fields=record_merging(context.table.config).compared_fields,
            schema_json=plan.schema_json,
            completed=frozenset(i.requested_time for i in timeline.instants if i.is_completed),
            earliest_active=timeline.instants[0].requested_time,
            keys=plan.keys,
            stats=sync.stats_spec if sync is not None else None,
            record_index=record_index,
            cancellable=context.cancellable,
            conflicts=context.conflicts,
            memory_budget=context.memory_budget,
        )
        return [replace(template, slices=slices) for slices in plan.groups]

    def task_function(
        self, plan: _ClusteringPlan, context: ExecutionContext
    ) -> Callable[[_GroupTask, TaskInfo], _GroupResult]:
        return _cluster_group

    def written(self, outcomes: Sequence[_GroupResult]) -> list[WrittenFile]:
        return [w for outcome in outcomes for w in outcome.written]

    def commit_metadata(
        self, plan: _ClusteringPlan, schema: Mapping[str, str]
    ) -> ReplaceCommitMetadata:
        return ReplaceCommitMetadata(
            extra_metadata=dict(schema),
            operation_type=CLUSTER_OPERATION,
            partition_to_replace_file_ids=dict(plan.replaced),
        )

    def replaced(self, plan: _ClusteringPlan) -> dict[str, list[str]]:
        return plan.replaced

    def metadata_logs(self, outcomes: Sequence[_GroupResult]) -> list[WriteStat]:
        return [stat for outcome in outcomes for stat in outcome.metadata_logs]

    def totals(
        self, result: ServiceResult, plan: _ClusteringPlan, outcomes: Sequence[_GroupResult]
    ) -> None:
        result.file_groups = sum(len(ids) for ids in plan.replaced.values())
        result.log_files_compacted = sum(o.log_files for o in outcomes)
        result.log_records_compacted = sum(o.log_records for o in outcomes)


execute_clustering = ClusteringExecutor().execute
"""Run a pending clustering plan and complete its replacecommit
(`CommitActionExecutor.execute`)."""


def _check_schema(
    schema: dict[str, Any], sort_columns: Sequence[str], keys: KeyGeneration | None
) -> None:
    """Refuse, before anything is written, sort columns the schema lacks and virtual key
    fields of types the key generator cannot print."""
    check_columns(schema, list(sort_columns))
    if keys is not None:
        keys.check_field_types(arrow_schema_from_avro(with_meta_fields(schema)))


def _input_groups(plan: dict[str, Any], paths: TablePaths) -> tuple[tuple[_SliceInput, ...], ...]:
    """The plan's input groups, each the slices one Spark task rewrites."""
    return tuple(
        tuple(_slice_input(piece, paths) for piece in group.get("slices") or [])
        for group in plan.get("inputGroups") or []
    )


def _slice_input(piece: dict[str, Any], paths: TablePaths) -> _SliceInput:
    """Plan paths are full paths (or names); each must be a file directly in the slice's
    partition folder inside the table, where new files of that partition are written too."""
    partition = paths.partition(piece.get("partitionPath") or "")
    base = piece.get("dataFilePath") or ""
    return _SliceInput(
        partition_path=partition,
        file_id=paths.name(str(piece["fileId"]), "file id"),
        base_file=paths.data_file(partition, base) if base else None,
        log_files=tuple(paths.data_file(partition, p) for p in piece.get("deltaFilePaths") or []),
    )


def _cluster_group(task: _GroupTask, info: TaskInfo) -> _GroupResult:
    """Runs on an executor: merge the group's slices and write them as new file groups. A
    cancel request stops it before it reads anything (the driver then aborts the plan).

    Within the task's memory budget whatever the group's size: each slice is merged as
    compaction merges it (`merge_file_slice`), the merged rows are sorted through local disk
    past the budget (`ExternalSort`), and each new file is written part by part."""
    if cancel_requested_in_task(
        task.base_uri, task.instant_time, task.cancellable
    ) or conflict_in_task(task.conflicts):
        return _GroupResult()
    storage = Storage(task.base_uri)
    schema = (
        arrow_schema_from_avro(with_meta_fields(json.loads(task.schema_json)))
        if task.schema_json
        else None
    )

    def is_committed(ts: str) -> bool:
        return ts in task.completed or ts < task.earliest_active

    result = _GroupResult()
    base_bytes = base_rows = log_bytes = 0
    order = [*task.sort_columns, RECORD_KEY]
    with task_workdir() as workdir:
        sorted_rows: dict[str, ExternalSort] = {}
        try:
            for index, piece in enumerate(task.slices):
                file_slice = _file_slice(storage, piece)
                sorter = sorted_rows.get(piece.partition_path)
                if sorter is None:
                    folder = f"{workdir}/sorted-{len(sorted_rows)}"
                    sorter = ExternalSort(order, task.memory_budget, folder)
                    sorted_rows[piece.partition_path] = sorter
                slice_folder = os.path.join(workdir, f"slice-{index}")
                os.mkdir(slice_folder)
                merge = merge_file_slice(
                    storage,
                    file_slice,
                    task.ordering_fields,
                    is_committed,
                    budget=task.memory_budget,
                    workdir=slice_folder,
                    schema=schema,
                    keys=task.keys,
                )
                for part in merge.parts:
                    sorter.add(part.rows)
                shutil.rmtree(slice_folder)  # its local copies and buckets
                result.log_files += len(file_slice.log_files)
                result.log_records += merge.log_records
                log_bytes += file_slice.log_size
                if file_slice.base_file is not None:
                    base_bytes += file_slice.base_file.size
                    base_rows += _parquet_rows(storage, file_slice.base_file.path)
        except TaskMemoryExceeded as exc:
            raise exc.with_remedy(REMEDY) from None
        bytes_per_row = (
            base_bytes / base_rows
            if base_rows
            else log_bytes / result.log_records
            if result.log_records
            else FALLBACK_BYTES_PER_ROW
        )
        rows_per_file = max(1, int(task.target_file_size // max(bytes_per_row, 1.0)))
        avro_schema = with_meta_fields(json.loads(task.schema_json)) if task.schema_json else None
        moved: list[tuple[str, str, pa.ChunkedArray]] = []
        for partition, sorter in sorted_rows.items():
            if sorter.rows == 0:
                continue
            files = max(1, math.ceil(sorter.rows / rows_per_file))
            chunk = math.ceil(sorter.rows / files)
            new_file: _NewFile | None = None
            for rows in sorter.sorted_tables():
                while rows.num_rows:
                    if new_file is None:
                        index = len(result.written)
                        new_file = _NewFile(storage, task, info, partition, index, workdir)
                        new_file.open(rows.schema, avro_schema)
                    taken = min(chunk - new_file.rows, rows.num_rows)
                    new_file.write(rows.slice(0, taken))
                    rows = rows.slice(taken)
                    if new_file.rows == chunk:
                        result.written.append(new_file.close())
                        if task.record_index is not None:
                            moved.append((partition, new_file.file_id, new_file.record_keys()))
                        new_file = None
            if new_file is not None:
                result.written.append(new_file.close())
                if task.record_index is not None:
                    moved.append((partition, new_file.file_id, new_file.record_keys()))
    if task.record_index is not None and moved:
        result.metadata_logs = write_record_index_logs(task.record_index, moved, info.write_token)
    return result


def _file_slice(storage: Storage, piece: _SliceInput) -> FileSlice:
    base: BaseFile | None = None
    base_instant = ""
    if piece.base_file is not None:
        name = BaseFileName.parse(posixpath.basename(piece.base_file))
        if name is None:
            raise ValueError(f"not a base file name: {piece.base_file}")
        base = BaseFile(name, piece.base_file, storage.info(piece.base_file).size)
        base_instant = name.instant_time
    logs: list[LogFile] = []
    for path in piece.log_files:
        log_name = LogFileName.parse(posixpath.basename(path))
        if log_name is None:
            raise ValueError(f"not a log file name: {path}")
        logs.append(LogFile(log_name, path, storage.info(path).size))
        base_instant = base_instant or log_name.base_instant_time
    logs.sort(key=lambda log: log.name.sort_key)
    return FileSlice(piece.partition_path, piece.file_id, base_instant, base, tuple(logs))


def _parquet_rows(storage: Storage, path: str) -> int:
    return int(read_footer(storage, path).num_rows)


class _NewFile:
    """One new file group of a clustering group, written part by part; commit time and
    seqno are kept, so incremental reads still work. Its footer's column ranges go back with
    the write stat when the metadata table keeps them."""

    def __init__(
        self,
        storage: Storage,
        task: _GroupTask,
        info: TaskInfo,
        partition: str,
        index: int,
        workdir: str,
    ) -> None:
        self.storage = storage
        self.task = task
        self.partition = partition
        self.file_id = new_file_id(index)
        self.name = str(BaseFileName(self.file_id, info.write_token, task.instant_time))
        self.path = posixpath.join(partition, self.name) if partition else self.name
        self.local = os.path.join(workdir, f"new-{self.name}")
        self.rows = 0
        self._keys: list[pa.ChunkedArray] = []
        self._writer: BaseFileWriter | None = None

    def open(self, merged_schema: pa.Schema, avro_schema: dict[str, Any] | None) -> None:
        create_marker(
            self.storage,
            self.task.instant_time,
            Marker(self.partition, self.name, MarkerType.CREATE),
        )
        stored = self._stored(merged_schema.empty_table()).schema
        self._writer = BaseFileWriter(
            self.storage,
            self.path,
            self.local,
            stored,
            avro_schema,
            row_group_bytes=min(ROW_GROUP_BYTES, self.task.memory_budget // 4),
        )

    def write(self, rows: pa.Table) -> None:
        assert self._writer is not None
        record_keys = rows.column(RECORD_KEY)
        self._writer.write(self._stored(rows), record_keys=record_keys)
        if self.task.record_index is not None:
            self._keys.append(record_keys)
        self.rows += rows.num_rows

    def record_keys(self) -> pa.ChunkedArray:
        """The record keys the file holds (an Arrow column), for the record index."""
        return pa.chunked_array([c for keys in self._keys for c in keys.chunks], pa.string())

    def close(self) -> WrittenFile:
        assert self._writer is not None
        size = self._writer.close()
        stat = WriteStat(
            file_id=self.file_id,
            path=self.path,
            prev_commit=NULL_COMMIT,
            partition_path=self.partition,
            num_writes=self.rows,
            num_inserts=self.rows,
            total_write_bytes=size,
            file_size_in_bytes=size,
        )
        return WrittenFile(stat, file_stats(self.storage, self.path, self.task.stats))

    def _stored(self, rows: pa.Table) -> pa.Table:
        return stored_rows(rows, self.name, meta_values=self.task.keys is None)
