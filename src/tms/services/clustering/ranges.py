"""A clustering group split over several Spark tasks by ranges of the first column of its
order: the first sort column, or the record key when the plan sorts by none.

When a plan asks for more than one output file group (`numOutputFileGroups`), the group's rows
are range-partitioned over that many tasks, as Hudi's sort-and-size execution strategy sorts
them with Spark (`sortBy` over `numOutputFileGroups` partitions). A group rewritten by one task
is sorted by the record key after the sort columns; a split group keeps that order, so its
files come out the same whether it is split or not:

1. sample: one task per slice reads the order's first column from its base file and returns
   a sample of it; the driver cuts the sampled rows into ranges of even row counts;
2. shuffle: one task per slice merges the slice within its budget and sends each merged
   row, as Arrow IPC, to the task of its range (Spark's shuffle, which spills to disk);
3. write: one task per range sorts its rows within its budget (`ExternalSort`) and writes
   them as new file groups of the target size.

Rows with equal first sort column values share a range, so each range sorted by the whole
order, ranges in order, is the group sorted. The ranges follow Arrow's ascending order, as the
sort within a range does: NaN after every other number and nulls last, both in the last range.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tms.hudi.files.external_sort import ExternalSort
from tms.hudi.memory import task_workdir
from tms.hudi.storage import Storage
from tms.hudi.storage.requests import counting
from tms.services import progress
from tms.services.clustering.rewrite import (
    GroupFigures,
    GroupResult,
    GroupTask,
    merged_slice,
    moved_keys,
    stopped,
    write_sorted,
)
from tms.services.spark import TaskInfo, current_task_info, record_task_requests, run_tasks
from tms.spark_runtime.zip_directories import read_zip_directories_once
from tms.testing.task_pause import TASKS_WRITING, after_task_work

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "SAMPLE_ROWS",
    "boundaries",
    "range_ids",
    "rangeable",
    "rewrite_split_groups",
    "splittable",
]

SAMPLE_ROWS = 1_000
"""First sort column values sampled per base file: enough to cut a few ranges evenly."""
SHUFFLE_SHARE = 40
"""A range's rows are sent once they take a `1 / (SHUFFLE_SHARE * ranges)` share of the
budget: PySpark batches up to ten pieces per range before handing them to Spark's shuffle,
so the pieces a task holds stay within a quarter of its budget."""
MIN_PIECE_BYTES = 64 * 1024


def rangeable(data_type: pa.DataType) -> bool:
    """Types whose order Arrow's comparison and sort agree on (and that have one)."""
    return bool(
        pa.types.is_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_decimal(data_type)
        or pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_large_binary(data_type)
        or pa.types.is_temporal(data_type)
        or pa.types.is_boolean(data_type)
    )


def splittable(task: GroupTask) -> bool:
    """The plan asks for several output file groups, in one partition, whose order's first
    column ranges can cut and base files store (a table with virtual keys stores no record
    key to sample)."""
    if task.outputs < 2 or not task.slices:
        return False
    if len({piece.partition_path for piece in task.slices}) != 1:
        return False
    if not task.sort_columns and task.keys is not None:
        return False
    column = task.order[0]
    schema = task.arrow_schema()
    if schema is None or schema.get_field_index(column) < 0:
        return False
    return rangeable(schema.field(column).type)


def boundaries(samples: Sequence[tuple[pa.Array, int]], ranges: int) -> pa.Array | None:
    """At most `ranges - 1` distinct ascending values cutting the sampled rows into ranges
    of even row counts; each sample stands for the rows of its file. None when nothing was
    sampled (no base file, or only nulls and NaN)."""
    values: list[pa.Array] = []
    weights: list[np.ndarray] = []
    for sample, rows in samples:
        sample = _comparable(sample)
        if len(sample) == 0 or rows <= 0:
            continue
        values.append(sample)
        weights.append(np.full(len(sample), rows / len(sample)))
    if not values or ranges < 2:
        return None
    data_type = values[0].type
    sampled = pa.concat_arrays([v.cast(data_type) for v in values])
    order = pc.sort_indices(sampled).to_numpy()
    sampled = sampled.take(pa.array(order))
    cumulative = np.cumsum(np.concatenate(weights)[order])
    total = cumulative[-1]
    cuts = [int(np.searchsorted(cumulative, total * k / ranges)) for k in range(1, ranges)]
    picked = pc.unique(sampled.take(pa.array([min(c, len(sampled) - 1) for c in cuts])))
    if len(picked) and pc.equal(picked[0], sampled[0]).as_py():
        picked = picked.slice(1)  # a first range of no rows
    return picked if len(picked) else None


def range_ids(column: pa.ChunkedArray | pa.Array, cuts: pa.Array) -> np.ndarray:
    """Each value's range: how many cuts are not after it (nulls and NaN: the last)."""
    ids = np.zeros(len(column), dtype=np.int32)
    cuts = cuts.cast(column.type)
    for cut in cuts:
        not_before = pc.greater_equal(column, cut).fill_null(True)
        ids += np.asarray(not_before.to_numpy(zero_copy_only=False), dtype=np.int32)
    if pa.types.is_floating(column.type):
        nan = np.asarray(pc.is_nan(column).fill_null(False).to_numpy(zero_copy_only=False))
        ids[nan] = len(cuts)
    return ids


@dataclass(frozen=True)
class _SplitGroup:
    task: GroupTask
    cuts: pa.Array
    first_partition: int
    """Its ranges are the shuffle's partitions `first_partition` onwards."""

    @property
    def ranges(self) -> int:
        return len(self.cuts) + 1


def rewrite_split_groups(
    spark: SparkSession, tasks: Sequence[GroupTask], description: str
) -> tuple[list[GroupResult], list[GroupTask]]:
    """Rewrite each group over its ranges; returns the ranges' results and the groups that
    could not be cut (no sample), which the caller rewrites one task each."""
    sampled = run_tasks(
        spark,
        _sample_slice,
        [(task, index) for task in tasks for index in range(len(task.slices))],
        f"{description}: key ranges",
        file_groups=False,
    )
    split: list[_SplitGroup] = []
    whole: list[GroupTask] = []
    taken = 0
    remaining = list(sampled)
    for task in tasks:
        samples, remaining = remaining[: len(task.slices)], remaining[len(task.slices) :]
        cuts = boundaries([s for s in samples if s is not None], task.outputs)
        if cuts is None:
            whole.append(task)
            continue
        split.append(_SplitGroup(task, cuts, taken))
        taken += len(cuts) + 1
    if not split:
        return [], whole
    sc = spark.sparkContext
    sc.setJobDescription(description)
    pieces = [(group, index) for group in split for index in range(len(group.task.slices))]
    partitions = [(group, r) for group in split for r in range(group.ranges)]
    progress.tasks_started(len(partitions))
    results: list[tuple[int, GroupResult, dict[str, int]]] = (
        sc.parallelize(pieces, len(pieces))
        .flatMap(_shuffle_slice)
        .partitionBy(len(partitions), _partition_of)
        .mapPartitionsWithIndex(_RangeWriter(partitions))
        .collect()
    )
    progress.tasks_done(len(partitions))
    record_task_requests(requests for _, _, requests in results)
    return [result for _, result, _ in sorted(results, key=lambda triple: triple[0])], whole


def _comparable(sample: pa.Array) -> pa.Array:
    """Nulls and NaN left out: they go to the last range whatever the cuts."""
    sample = sample.drop_null()
    if pa.types.is_floating(sample.type):
        sample = sample.filter(pc.invert(pc.is_nan(sample)))
    return sample


def _sample_slice(item: tuple[GroupTask, int], info: TaskInfo) -> tuple[pa.Array, int] | None:
    """Up to `SAMPLE_ROWS` evenly spaced values of the order's first column in a slice's base
    file, as the table's schema types them, and the file's row count; only that column's
    chunks are read."""
    task, index = item
    piece = task.slices[index]
    schema = task.arrow_schema()
    if piece.base_file is None or schema is None:
        return None
    column = task.order[0]
    storage = Storage(task.base_uri)
    kept: list[pa.Array] = []
    # ranged reads: the footer and the column's chunks, not the whole file
    with pq.ParquetFile(storage.open_ranged(piece.base_file)) as parquet:
        rows = parquet.metadata.num_rows
        if rows == 0 or column not in parquet.schema_arrow.names:
            return None
        step = max(1, rows // SAMPLE_ROWS)
        seen = 0
        for batch in parquet.iter_batches(columns=[column]):
            values = batch.column(0)
            first = (-seen) % step
            kept.append(values.take(pa.array(range(first, len(values), step))))
            seen += len(values)
    sample = pa.concat_arrays(kept) if kept else pa.array([], schema.field(column).type)
    try:
        return sample.cast(schema.field(column).type), rows
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _shuffle_slice(item: tuple[_SplitGroup, int]) -> Iterator[tuple[int, Any]]:
    """Stage one of a split group (a slice per task): the slice's merged rows, each sent to
    its range's task as Arrow IPC pieces, then the slice's figures to every range's task."""
    read_zip_directories_once()
    group, index = item
    task = group.task
    if stopped(task):
        return
    column = task.order[0]
    piece_bytes = max(MIN_PIECE_BYTES, task.memory_budget // (SHUFFLE_SHARE * group.ranges))
    figures = GroupFigures()
    with counting() as requests:
        storage = Storage(task.base_uri)
        held: list[list[pa.Table]] = [[] for _ in range(group.ranges)]
        held_bytes = [0] * group.ranges
        with task_workdir() as workdir:
            parts = merged_slice(
                storage, task, task.slices[index], task.arrow_schema(), workdir, figures
            )
            for rows in parts:
                ids = range_ids(rows.column(column), group.cuts)
                for r in np.unique(ids):
                    part = rows.take(pa.array(np.flatnonzero(ids == r)))
                    held[r].append(part)
                    held_bytes[r] += part.nbytes
                    if held_bytes[r] >= piece_bytes:
                        yield group.first_partition + int(r), _ipc(held[r])
                        held[r], held_bytes[r] = [], 0
        for r, tables in enumerate(held):
            if tables:
                yield group.first_partition + r, _ipc(tables)
    counts = requests.as_dict()
    for r in range(group.ranges):
        yield group.first_partition + r, (figures, counts if r == 0 else {})


def _partition_of(key: int) -> int:
    return key


SHUFFLE_COMPRESSION = "lz4"
"""Pieces are sent LZ4-compressed: a piece passes through PySpark's batches, the JVM and its
shuffle files, so a smaller one costs less memory and time at every step (measured on a
0.5 GB group: its largest Python worker 364-370 MB instead of 556-558, and 6-15 % faster)."""


def _ipc(tables: Iterable[pa.Table]) -> bytes:
    tables = list(tables)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=SHUFFLE_COMPRESSION)
    with pa.ipc.new_stream(sink, tables[0].schema, options=options) as writer:
        for table in tables:
            writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


class _RangeWriter:
    """Stage two of a split group (a range per task): the range's rows sorted within the
    budget and written as new file groups, the group's figures summed from its slices."""

    def __init__(self, partitions: Sequence[tuple[_SplitGroup, int]]) -> None:
        self.partitions = list(partitions)

    def __call__(
        self, index: int, received: Iterable[tuple[int, Any]]
    ) -> Iterator[tuple[int, GroupResult, dict[str, int]]]:
        read_zip_directories_once()
        group, r = self.partitions[index]
        task = group.task
        info = current_task_info()
        requested: Counter[str] = Counter()
        result = GroupResult()
        with counting() as requests:
            if not stopped(task):
                self._write(task, info, received, r, result, requested)
        after_task_work(TASKS_WRITING)
        requested.update(requests.as_dict())
        yield index, result, dict(requested)

    @staticmethod
    def _write(
        task: GroupTask,
        info: TaskInfo,
        received: Iterable[tuple[int, Any]],
        r: int,
        result: GroupResult,
        requested: Counter[str],
    ) -> None:
        storage = Storage(task.base_uri)
        partition = task.slices[0].partition_path
        figures = GroupFigures()
        with task_workdir() as workdir:
            moved = moved_keys(task, workdir)
            sorter = ExternalSort(task.order, task.memory_budget, posixpath.join(workdir, "sorted"))
            for _, payload in received:
                if isinstance(payload, bytes):
                    sorter.add(pa.ipc.open_stream(payload).read_all())
                else:
                    slice_figures, counts = payload
                    figures.add(slice_figures)
                    requested.update(counts)
            rows_per_file = figures.rows_per_file(task.target_file_size)
            write_sorted(
                storage, task, info, partition, sorter, rows_per_file, workdir, result, moved
            )
            if moved is not None:
                result.metadata_logs = moved.write(info.write_token)
        if r == 0:  # the group's log figures, once
            result.log_files, result.log_records = figures.log_files, figures.log_records
