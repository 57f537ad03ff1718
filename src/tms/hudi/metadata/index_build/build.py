"""Building new metadata partitions from the data table's latest file slices, on Spark
(`HoodieBackedTableMetadataWriter.initializeMetadataPartition` for column stats, partition stats
and the record index).

Stage one: one task per data file group reads its latest slice as of the cut and emits its
records (encoded, keyed by metadata partition and key): the record index an entry per live key
(location: the slice's file group and base instant, no position), column stats an entry per
indexed column of the base file (footer), partition stats the base file's ranges, which merge
per data partition (`partition_stats_entries`, tight bounds) in a reduce. The record index's
file group count follows from its key count (`estimate_file_group_count`), taken from the
persisted first stage. Stage two: records shuffle to their file group (Hudi's key hashing),
one task per file group writes its files (`files.write_new_file_group`) and returns its write
stat. The driver sees counts and write stats only, and completes the metadata table's delta
commit `instant_time`; the data table's config and index definitions are left to the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tms.hudi.errors import TableNotFoundError, UnsupportedTableError
from tms.hudi.files.data import write_partition_metadata
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.marked_files import delete_unreported_files
from tms.hudi.files.markers import delete_markers
from tms.hudi.metadata.cells import cell_value, location_value
from tms.hudi.metadata.column_stats import ColumnRange
from tms.hudi.metadata.index_build.files import (
    BULK_INSERT_OPERATION,
    FileGroupLayout,
    FileGroupWrite,
    NewFileGroup,
    complete_delta_commit,
    start_delta_commit,
    write_new_file_group,
)
from tms.hudi.metadata.index_build.shuffle import (
    RANGES,
    KeyBatch,
    by_file_group,
    cell_parts,
    item_counts,
    ranges_by_partition,
    records_only,
)
from tms.hudi.metadata.index_build.sizing import file_group_count
from tms.hudi.metadata.index_build.slices import SliceReading, latest_slices, timeline_as_of
from tms.hudi.metadata.index_build.spec import DataTable, IndexSpec, IndexWrite
from tms.hudi.metadata.partition_stats import ColumnType, partition_stats_entries
from tms.hudi.metadata.partitions import COLUMN_STATS, FILES, PARTITION_STATS, RECORD_INDEX
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import RecordLocation, instant_millis, stats_record
from tms.hudi.metadata.schema import writer_schema
from tms.hudi.metadata.stats_keys import column_stats_key
from tms.hudi.timeline.timeline import Timeline
from tms.testing.task_pause import after_task_work

__all__ = ["build_partitions", "slice_location", "task_write_token"]


def slice_location(file_slice: FileSlice) -> RecordLocation:
    """Where the record index puts a key of a slice: its file group and base instant."""
    millis = instant_millis(file_slice.base_instant_time)
    return RecordLocation(file_slice.partition_path, file_slice.file_id, millis)


def task_write_token() -> str:
    """`<partition>-<stage>-<attempt>` of the Spark task running (Hudi's write token)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return "0-0-0"
    return f"{context.partitionId()}-{context.stageId()}-{context.taskAttemptId()}"


@dataclass(frozen=True)
class _SliceRecords:
    """Stage one: what one data file group contributes to each partition built."""

    reading: SliceReading
    partitions: tuple[str, ...]
    schema: str

    def __call__(self, file_slice: FileSlice) -> Iterator[tuple[str, str, Any]]:
        if RECORD_INDEX in self.partitions:
            # A cell's value leaves the key out: every key of the slice has the same one.
            value = location_value(slice_location(file_slice), self.schema)
            for keys in self.reading.record_key_batches(file_slice):
                if keys:
                    yield RECORD_INDEX, "", KeyBatch(keys, value)
        if not {COLUMN_STATS, PARTITION_STATS} & set(self.partitions):
            return
        ranges = self.reading.base_file_ranges(file_slice)
        if COLUMN_STATS in self.partitions:
            for item in ranges:
                key = column_stats_key(file_slice.partition_path, item.file_name, item.column_name)
                yield COLUMN_STATS, key, cell_value(stats_record(key, item.payload()), self.schema)
        if PARTITION_STATS in self.partitions and ranges:
            yield RANGES, file_slice.partition_path, tuple(ranges)


@dataclass(frozen=True)
class _PartitionStats:
    """The reduce's output: one data partition's stats records from its files' ranges."""

    columns: tuple[str, ...]
    types: dict[str, ColumnType]
    schema: str

    def __call__(self, pair: tuple[str, list[ColumnRange]]) -> Iterator[tuple[str, str, Any]]:
        partition, ranges = pair
        for key, payload in partition_stats_entries(partition, ranges, self.types, self.columns):
            record = stats_record(key, payload, partition_stats=True)
            yield PARTITION_STATS, key, cell_value(record, self.schema)


@dataclass(frozen=True)
class _FileGroupTask:
    """Stage two: one task writes one file group of the cells routed to it."""

    layout: FileGroupLayout
    target: NewFileGroup

    def __call__(
        self, number: int, cells: Iterable[tuple[int, tuple[str, bytes]]]
    ) -> Iterator[FileGroupWrite]:
        partition, index = self.layout.locate(number)
        written = write_new_file_group(
            self.target, partition, index, cell_parts(cells), task_write_token()
        )
        after_task_work()
        yield written


def _refusals(reader: MetadataTableReader, spec: IndexSpec, instant_time: str) -> list[str]:
    reasons: list[str] = []
    built = set(reader.data_config.metadata_partitions)
    if FILES not in built:
        reasons.append("the metadata table's files partition is not built")
    for partition in spec.partitions:
        if partition in built:
            reasons.append(f"metadata partition {partition} is already built")
        elif reader.storage.exists(partition):
            reasons.append(f"metadata partition {partition} already has a folder (abort first)")
    if reader.timeline.get(instant_time) is not None:
        reasons.append(f"the metadata table already has instant {instant_time}")
    return reasons


def open_metadata_table(table: DataTable, timeline: Timeline) -> MetadataTableReader:
    """The table's metadata table; `UnsupportedTableError` when it has none."""
    try:
        return MetadataTableReader.open(table.storage, table.config, timeline)
    except TableNotFoundError as missing:
        raise UnsupportedTableError(f"cannot build the index: {missing}") from missing


def build_partitions(
    spark: Any,
    table: DataTable,
    spec: IndexSpec,
    *,
    as_of: str,
    instant_time: str,
    timeline: Timeline | None = None,
    memory_budget: int,
) -> IndexWrite:
    """Index the latest file slices as of `as_of` into the new partitions of `spec`, written
    as the metadata table's completed delta commit `instant_time` of base HFiles; each task
    merges its slice within `memory_budget` bytes of records."""
    timeline = timeline or table.timeline()
    reader = open_metadata_table(table, timeline)
    reasons = _refusals(reader, spec, instant_time)
    if reasons:
        raise UnsupportedTableError("cannot build the index: " + "; ".join(reasons))
    cut = timeline_as_of(timeline, as_of)
    slices = latest_slices(table, cut)
    reading = SliceReading.of(table, cut, spec.columns, spec.version, memory_budget=memory_budget)
    schema = writer_schema(table.config.table_version, reader.written_schema)
    storage, config = reader.storage, reader.config
    for partition in spec.partitions:
        write_partition_metadata(storage, partition, instant_time)
    inflight = start_delta_commit(storage, config, instant_time, BULK_INSERT_OPERATION)

    sc = spark.sparkContext
    sc.setJobDescription(f"tms index {instant_time} of {table.name}: {', '.join(spec.partitions)}")
    items = sc.parallelize(slices, max(len(slices), 1)).flatMap(
        _SliceRecords(reading, spec.partitions, schema)
    )
    items.persist()
    try:
        key_count = item_counts(items).get(RECORD_INDEX, 0)
        layout = FileGroupLayout(
            tuple((p, file_group_count(p, key_count)) for p in spec.partitions)
        )
        records = records_only(items)
        if PARTITION_STATS in spec.partitions:
            merged = ranges_by_partition(items).flatMap(
                _PartitionStats(spec.columns, dict(spec.types), schema)
            )
            records = records.union(merged)
        target = NewFileGroup(storage.base_path, instant_time, schema, memory_budget)
        writes: list[FileGroupWrite] = (
            by_file_group(records, layout)
            .mapPartitionsWithIndex(_FileGroupTask(layout, target))
            .collect()
        )
    finally:
        items.unpersist()
    stats = [w.stat for w in writes if w.stat is not None]
    delete_unreported_files(storage, instant_time, {s.path for s in stats if s.path})
    complete_delta_commit(storage, config, inflight, BULK_INSERT_OPERATION, schema, stats)
    delete_markers(storage, instant_time)
    return IndexWrite(
        file_groups=layout.total,
        files_written=len(stats) + len(writes),
        bytes_written=sum(s.total_write_bytes for s in stats) + sum(w.log_bytes for w in writes),
        records_written=sum(s.num_writes for s in stats),
        data_file_groups=len(slices),
        record_keys=key_count,
    )
