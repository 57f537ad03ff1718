"""One clustering group rewritten on an executor: its slices merged, its rows sorted, new file
groups written, all within the task's memory budget.

A group is rewritten by one Spark task (`rewrite_group`), or, when its plan asks for several
output file groups, by one task per key range (`tms.services.clustering.ranges`): both read
slices with `merged_slice` and write sorted rows with `write_sorted`.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tms.hudi.avro.schema import arrow_schema_from_avro, with_meta_fields
from tms.hudi.avro.write_stat import NULL_COMMIT, WriteStat
from tms.hudi.files.codec import HUDI_DEFAULT_CODEC
from tms.hudi.files.data import BaseFileWriter, read_footer, stored_rows, task_row_group_bytes
from tms.hudi.files.external_sort import ExternalSort
from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.names import BaseFileName, LogFileName, new_file_id
from tms.hudi.files.spilled_slice import merge_file_slice
from tms.hudi.memory import TaskMemoryExceeded, task_workdir
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.metadata.record_index_logs import MovedKeys, RecordIndexLogs
from tms.hudi.record_keys import KeyGeneration
from tms.hudi.storage import Storage
from tms.services.clustering.plan import FALLBACK_BYTES_PER_ROW
from tms.services.conflicts import ConflictCheck
from tms.services.execution import cancel_requested_in_task, conflict_in_task
from tms.services.metadata_sync import StatsSpec, WrittenFile, file_stats
from tms.services.spark import TaskInfo
from tms.spark_runtime.task_memory import DEFAULT_RECORDS, REMEDY

__all__ = [
    "GroupFigures",
    "GroupResult",
    "GroupTask",
    "SliceInput",
    "merged_slice",
    "rewrite_group",
    "stopped",
    "write_sorted",
]


@dataclass(frozen=True)
class SliceInput:
    partition_path: str
    file_id: str
    base_file: str | None
    """Relative to the base path, like the log files."""
    log_files: tuple[str, ...]


@dataclass(frozen=True)
class GroupTask:
    """Everything a Spark task needs to rewrite one clustering group (small, picklable)."""

    base_uri: str
    instant_time: str
    slices: tuple[SliceInput, ...]
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
    memory_budget: int = DEFAULT_RECORDS
    """Bytes of records the task holds at once; a larger group is sorted through local disk."""
    outputs: int = 1
    """The output file groups the plan asks for (`numOutputFileGroups`)."""
    codec: str = HUDI_DEFAULT_CODEC
    """The Parquet codec of the new base files (`tms.hudi.files.codec`)."""

    @property
    def order(self) -> list[str]:
        """The rows' order in the new files: the sort columns, then the record key."""
        return [*self.sort_columns, RECORD_KEY]

    def arrow_schema(self) -> pa.Schema | None:
        if not self.schema_json:
            return None
        return arrow_schema_from_avro(with_meta_fields(json.loads(self.schema_json)))

    def is_committed(self, instant_time: str) -> bool:
        return instant_time in self.completed or instant_time < self.earliest_active


@dataclass
class GroupResult:
    written: list[WrittenFile] = field(default_factory=list)
    log_files: int = 0
    log_records: int = 0
    metadata_logs: list[WriteStat] = field(default_factory=list)
    """Record index log files written into the metadata table's pending delta commit."""


@dataclass
class GroupFigures:
    """What reading a group's slices tells of its size: new files are cut by rows, at the
    rows the target file size holds at the group's bytes per row."""

    log_files: int = 0
    log_records: int = 0
    log_bytes: int = 0
    base_bytes: int = 0
    base_rows: int = 0

    def add(self, other: GroupFigures) -> None:
        self.log_files += other.log_files
        self.log_records += other.log_records
        self.log_bytes += other.log_bytes
        self.base_bytes += other.base_bytes
        self.base_rows += other.base_rows

    def rows_per_file(self, target_file_size: int) -> int:
        bytes_per_row = (
            self.base_bytes / self.base_rows
            if self.base_rows
            else self.log_bytes / self.log_records
            if self.log_records
            else FALLBACK_BYTES_PER_ROW
        )
        return max(1, int(target_file_size // max(bytes_per_row, 1.0)))


def stopped(task: GroupTask) -> bool:
    """The plan was cancelled or another writer conflicts: the task writes nothing (the
    driver then aborts the plan)."""
    return cancel_requested_in_task(
        task.base_uri, task.instant_time, task.cancellable
    ) or conflict_in_task(task.conflicts)


def merged_slice(
    storage: Storage,
    task: GroupTask,
    piece: SliceInput,
    schema: pa.Schema | None,
    workdir: str,
    figures: GroupFigures,
) -> Iterator[pa.Table]:
    """The merged rows of one slice of the group, a part at a time within the task's budget
    (as compaction merges it); `figures` counts the slice once its rows are all out."""
    file_slice = _file_slice(storage, piece)
    slice_folder = tempfile.mkdtemp(prefix="slice-", dir=workdir)
    try:
        merge = merge_file_slice(
            storage,
            file_slice,
            task.ordering_fields,
            task.is_committed,
            budget=task.memory_budget,
            workdir=slice_folder,
            schema=schema,
            keys=task.keys,
        )
        for part in merge.parts:
            yield part.rows
    except TaskMemoryExceeded as exc:
        raise exc.with_remedy(REMEDY) from None
    finally:
        shutil.rmtree(slice_folder)  # its local copies and buckets
    figures.log_files += len(file_slice.log_files)
    figures.log_records += merge.log_records
    figures.log_bytes += file_slice.log_size
    if file_slice.base_file is not None:
        figures.base_bytes += file_slice.base_file.size
        figures.base_rows += int(read_footer(storage, file_slice.base_file.path).num_rows)


def write_sorted(
    storage: Storage,
    task: GroupTask,
    info: TaskInfo,
    partition: str,
    sorter: ExternalSort,
    rows_per_file: int,
    workdir: str,
    result: GroupResult,
    moved: MovedKeys | None,
) -> None:
    """The sorter's rows written in order as new file groups of `partition`, of even row
    counts, each at most `rows_per_file` rows; each file's record keys go to `moved` when
    the metadata table keeps a record index."""
    if sorter.rows == 0:
        return
    files = max(1, math.ceil(sorter.rows / rows_per_file))
    chunk = math.ceil(sorter.rows / files)
    avro_schema = with_meta_fields(json.loads(task.schema_json)) if task.schema_json else None
    new_file: _NewFile | None = None
    for rows in sorter.sorted_tables():
        while rows.num_rows:
            if new_file is None:
                new_file = _NewFile(
                    storage, task, info, partition, len(result.written), workdir, moved
                )
                new_file.open(rows.schema, avro_schema)
            taken = min(chunk - new_file.rows, rows.num_rows)
            new_file.write(rows.slice(0, taken))
            rows = rows.slice(taken)
            if new_file.rows == chunk:
                result.written.append(new_file.close())
                new_file = None
    if new_file is not None:
        result.written.append(new_file.close())


def rewrite_group(task: GroupTask, info: TaskInfo) -> GroupResult:
    """Runs on an executor: merge the group's slices and write them as new file groups. A
    cancel request stops it before it reads anything.

    Within the task's memory budget whatever the group's size: each slice is merged as
    compaction merges it (`merge_file_slice`), the merged rows are sorted through local disk
    past the budget (`ExternalSort`), and each new file is written part by part."""
    if stopped(task):
        return GroupResult()
    storage = Storage(task.base_uri)
    schema = task.arrow_schema()
    figures = GroupFigures()
    result = GroupResult()
    with task_workdir() as workdir:
        moved = moved_keys(task, workdir)
        sorted_rows: dict[str, ExternalSort] = {}
        for piece in task.slices:
            sorter = sorted_rows.get(piece.partition_path)
            if sorter is None:
                folder = f"{workdir}/sorted-{len(sorted_rows)}"
                sorter = ExternalSort(task.order, task.memory_budget, folder)
                sorted_rows[piece.partition_path] = sorter
            for rows in merged_slice(storage, task, piece, schema, workdir, figures):
                sorter.add(rows)
        rows_per_file = figures.rows_per_file(task.target_file_size)
        for partition, sorter in sorted_rows.items():
            write_sorted(
                storage, task, info, partition, sorter, rows_per_file, workdir, result, moved
            )
        if moved is not None:
            result.metadata_logs = moved.write(info.write_token)
    result.log_files, result.log_records = figures.log_files, figures.log_records
    return result


def moved_keys(task: GroupTask, workdir: str) -> MovedKeys | None:
    """Where the task gathers the keys it moves, when the metadata table keeps a record
    index (half the budget: the rows' sort holds the rest while the files are written)."""
    if task.record_index is None:
        return None
    return MovedKeys(task.record_index, workdir, task.memory_budget // 2)


def _file_slice(storage: Storage, piece: SliceInput) -> FileSlice:
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


class _NewFile:
    """One new file group of a clustering group, written part by part; commit time and
    seqno are kept, so incremental reads still work. Its footer's column ranges go back with
    the write stat when the metadata table keeps them."""

    def __init__(
        self,
        storage: Storage,
        task: GroupTask,
        info: TaskInfo,
        partition: str,
        index: int,
        workdir: str,
        moved: MovedKeys | None,
    ) -> None:
        self.storage = storage
        self.task = task
        self.partition = partition
        self.file_id = new_file_id(index)
        self.name = str(BaseFileName(self.file_id, info.write_token, task.instant_time))
        self.path = posixpath.join(partition, self.name) if partition else self.name
        self.local = os.path.join(workdir, f"new-{self.name}")
        self.rows = 0
        self._moved = moved
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
            row_group_bytes=task_row_group_bytes(self.task.memory_budget),
            bloom_filter=self.task.keys is None,
            compression=self.task.codec,
        )

    def write(self, rows: pa.Table) -> None:
        assert self._writer is not None
        record_keys = rows.column(RECORD_KEY)
        self._writer.write(self._stored(rows), record_keys=record_keys)
        if self._moved is not None:
            self._moved.add(self.partition, self.file_id, record_keys)
        self.rows += rows.num_rows

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
