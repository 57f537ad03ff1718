"""Bringing partitions built at one instant forward over the data instants completed since
(the catch-up of Hudi's `RunIndexActionExecutor`), as one delta commit of log files on the
partitions' existing file groups, whether the data table lists them as built or inflight.

What the instants change, read from their metadata on the driver (file names, never records):
the data file groups their write stats name (and a replacecommit's replaced ones), the base
files they wrote, the files their cleans deleted, the partitions they touched. Then on Spark,
one task per work item:

- record_index: each touched file group's latest slice as of `until` (the cut that counts only
  the instants applied) gives its keys; the task writing a record index file group diffs them
  against what that file group holds (as built, and logged since): a key located elsewhere is
  moved, a new key located (the slice's base instant), a key the index places in a touched file
  group that no longer holds it deleted. Keys that stay are left as they are, as Hudi's writers
  leave updated keys. Within the task's budget: the incoming keys are sorted through local
  disk and joined in key order with the file group read key by key (`slice_merge`), and the
  changes are written block by block. Nothing is read as of `since`: a clean in the window
  may have deleted those files.
- column_stats: each new base file's entries from its footer; the deletion entries of each
  cleaned file (a file written and cleaned within the window gets only those).
- partition_stats: each touched data partition recomputed from its latest base files as of
  `until` (as a fresh build would); a partition left without files gets deletion entries.

Records shuffle to their metadata file group; one task per file group writes its log file (an
HFile data block, a delete block for deleted keys), with an APPEND marker first. Stats of files
cleaned after `until` are skipped (that clean's own update covers them); a record index slice
whose files are gone fails the catch-up.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import DeleteRecord
from tms.hudi.files.log_writer import encode_delete_block
from tms.hudi.files.marked_files import delete_unreported_files
from tms.hudi.files.markers import (
    Marker,
    MarkerType,
    create_marker,
    delete_markers,
)
from tms.hudi.files.names import LogFileName
from tms.hudi.memory import task_workdir
from tms.hudi.metadata.cells import cell_value, location_record, record_cells
from tms.hudi.metadata.column_stats import ColumnRange, deletion_entries, file_ranges
from tms.hudi.metadata.index_build.build import (
    open_metadata_table,
    slice_location,
    task_write_token,
)
from tms.hudi.metadata.index_build.changes import Changes, changes_of
from tms.hudi.metadata.index_build.files import (
    FileGroupLayout,
    complete_delta_commit,
    start_delta_commit,
)
from tms.hudi.metadata.index_build.shuffle import (
    RANGES,
    by_file_group,
    cell_parts,
    ranges_by_partition,
    records_only,
)
from tms.hudi.metadata.index_build.slices import SliceReading, latest_slices, timeline_as_of
from tms.hudi.metadata.index_build.spec import DataTable, IndexSpec, IndexWrite
from tms.hudi.metadata.index_defs import IndexVersion
from tms.hudi.metadata.partition_stats import (
    ColumnType,
    partition_deletion_entries,
    partition_stats_entries,
)
from tms.hudi.metadata.partitions import (
    COLUMN_STATS,
    PARTITION_STATS,
    RECORD_INDEX,
    MetadataPartition,
)
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import MetadataRecord, stats_record
from tms.hudi.metadata.schema import decode_record, writer_schema
from tms.hudi.metadata.slice_merge import merge_slice_by_key
from tms.hudi.metadata.sorted_cells import (
    RepeatedKeyError,
    Repeats,
    SortedCells,
    SortedPiece,
)
from tms.hudi.metadata.stats_keys import column_stats_key
from tms.hudi.metadata.writer import (
    OPERATION,
    FileGroupLog,
    delta_write_stat,
    frame_hfile_log,
    hfile_writer,
    log_file_content,
    log_write_stat,
)
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import WRITE_ACTIONS, Instant
from tms.hudi.timeline.layout import TimelineLayout
from tms.hudi.timeline.timeline import Timeline

__all__ = ["catch_up"]

CLEANED = "cleaned"
"""A work item naming a file a clean deleted: (CLEANED, partition, file name)."""


def _cut_applying(
    timeline: Timeline, since: str, until: str, instants: Sequence[Instant]
) -> Timeline:
    """The timeline as of `until` counting only the writes applied: a write completed after
    `since` but not among `instants` is left out (a writer logs it itself)."""
    applied = {i.requested_time for i in instants}
    cut = timeline_as_of(timeline, until)
    kept = tuple(
        i
        for i in cut.instants
        if not (
            i.is_completed
            and i.requested_time > since
            and cut.origin_action(i) in WRITE_ACTIONS
            and i.requested_time not in applied
        )
    )
    return dataclasses.replace(cut, instants=kept)


@dataclass(frozen=True)
class _Work:
    """What the first stage's tasks read (small and picklable)."""

    after: SliceReading
    columns: tuple[str, ...]
    version: IndexVersion
    base_path: str

    def __call__(self, item: tuple[Any, ...]) -> Iterator[tuple[str, str, Any]]:
        kind = item[0]
        storage = Storage(self.base_path)
        if kind == RECORD_INDEX:
            location = slice_location(item[1])
            for keys in self.after.record_key_batches(item[1]):
                for key in keys:
                    yield RECORD_INDEX, key, location_record(key, location)
        elif kind == COLUMN_STATS:
            _, partition, path = item
            if not storage.exists(path):
                return  # cleaned after `until`: the clean's own update writes its tombstones
            for r in file_ranges(storage, path, self.columns, self.version):
                key = column_stats_key(partition, r.file_name, r.column_name)
                yield COLUMN_STATS, key, stats_record(key, r.payload())
        elif kind == CLEANED:
            _, partition, name = item
            for key, payload in deletion_entries(partition, name, self.columns, self.version):
                yield COLUMN_STATS, key, stats_record(key, payload)
        elif kind == RANGES:
            base = item[1].base_file
            if base is not None and storage.exists(base.path):
                yield RANGES, item[1].partition_path, tuple(self.after.base_file_ranges(item[1]))


@dataclass(frozen=True)
class _PartitionStats:
    columns: tuple[str, ...]
    types: dict[str, ColumnType]

    def __call__(self, pair: tuple[str, list[ColumnRange]]) -> Iterator[tuple[str, str, Any]]:
        partition, ranges = pair
        for key, payload in partition_stats_entries(partition, ranges, self.types, self.columns):
            yield PARTITION_STATS, key, stats_record(key, payload, partition_stats=True)


@dataclass(frozen=True)
class _IndexState:
    """The record index as built (and logged since), for the tasks that diff against it."""

    slices: tuple[FileSlice, ...]
    valid: frozenset[str]
    touched: frozenset[tuple[str, str]]
    """(partition, file id) of the data file groups the catch-up re-read."""
    memory_budget: int
    """Bytes a task holds of a delete block's keys while it reads the index's file group."""

    def diff(
        self, index: int, metadata_path: str, incoming: Iterator[tuple[str, bytes]], schema: str
    ) -> Iterator[tuple[str, bytes | None]]:
        """The changes to file group `index`, in key order: (key, cell value) of an incoming
        key new to the file group or located elsewhere, (key, None) of a key the file group
        places in a touched data file group that no longer holds it. The file group is read
        key by key (`slice_merge`) and joined with the incoming cells, sorted by key."""
        storage = Storage(metadata_path)
        with task_workdir() as workdir:
            current = merge_slice_by_key(
                storage,
                self.slices[index],
                self.valid.__contains__,
                workdir=workdir,
                budget=self.memory_budget,
            )
            new = next(incoming, None)
            for one in current:
                while new is not None and new[0] < one.key:
                    yield new
                    new = next(incoming, None)
                where = _located(one.record())
                if new is not None and new[0] == one.key:
                    if _located(MetadataRecord(new[0], decode_record(new[1], schema))) != where:
                        yield new
                    new = next(incoming, None)
                elif where is not None and where in self.touched:
                    yield one.key, None
            while new is not None:
                yield new
                new = next(incoming, None)


def _located(record: MetadataRecord | None) -> tuple[str, str] | None:
    """(data partition, file id) of a record index entry."""
    location = record.record_location() if record is not None else None
    return None if location is None else (location.partition_path, location.file_id)


@dataclass(frozen=True)
class _LogTask:
    """One task per metadata file group: its log file of the records routed to it."""

    layout: FileGroupLayout
    metadata_path: str
    instant_time: str
    schema: str
    index: _IndexState | None
    timeline_layout: TimelineLayout
    slices: dict[tuple[str, str], FileSlice]
    """(metadata partition, file id) → the slice a log file goes into (table version 6 names
    its log files by that slice's base instant)."""

    def __call__(
        self, number: int, cells: Iterable[tuple[int, tuple[str, MetadataRecord]]]
    ) -> Iterator[WriteStat]:
        partition, index = self.layout.locate(number)
        if partition == RECORD_INDEX and self.index is not None:
            yield from self._record_index_log(index, cells, self.index)
            return
        incoming: dict[str, MetadataRecord] = {}
        for _, (key, record) in cells:
            if key in incoming:
                raise ValueError(f"{partition}: key {key!r} is written twice by one catch-up")
            incoming[key] = record
        if not incoming:
            return
        file_slice = self._slice(partition, index)
        write = FileGroupLog(
            partition, file_slice, record_cells(incoming.values(), self.schema), []
        )
        storage = Storage(self.metadata_path)
        marker, name = self._marker(storage, file_slice)
        content = log_file_content(self.instant_time, self.schema, write)
        storage.write_bytes(marker.data_file_path, content, atomic=False)
        yield log_write_stat(write, name, len(content))

    def _record_index_log(
        self,
        index: int,
        cells: Iterable[tuple[int, tuple[str, MetadataRecord]]],
        state: _IndexState,
    ) -> Iterator[WriteStat]:
        """The record index file group's changes (`_IndexState.diff`) as one log file, within
        the budget: the incoming cells sorted through local disk, the upserts' HFile written
        block by block and framed into the log file on local disk, then moved into place."""
        with task_workdir() as workdir:
            folder = os.path.join(workdir, "incoming")
            incoming = SortedCells(state.memory_budget, folder, Repeats.REFUSE)
            encoded = ((n, (key, cell_value(r, self.schema))) for n, (key, r) in cells)
            for keys, values in cell_parts(encoded):
                incoming.add(0, keys, values)
            hfile = os.path.join(workdir, "upserts.hfile")
            writer = hfile_writer(self.schema, hfile)
            deletes: list[str] = []
            upserts = 0
            try:
                changes = state.diff(
                    index, self.metadata_path, _piece_cells(incoming.pieces()), self.schema
                )
                for key, value in changes:
                    if value is None:
                        deletes.append(key)
                    else:
                        writer.append(key, value)
                        upserts += 1
            except RepeatedKeyError as repeated:
                raise ValueError(f"{RECORD_INDEX}: {repeated} by one catch-up") from repeated
            content_length = writer.close()
            if not upserts and not deletes:
                return
            file_slice = self._slice(RECORD_INDEX, index)
            local = os.path.join(workdir, "catch-up.log")
            after = b""
            if deletes:
                deleted = [DeleteRecord(key, RECORD_INDEX) for key in deletes]
                after = encode_delete_block(self.instant_time, json.loads(self.schema), deleted)
            frame_hfile_log(
                local,
                hfile if upserts else None,
                content_length,
                self.instant_time,
                self.schema,
                after,
            )
            storage = Storage(self.metadata_path)
            marker, name = self._marker(storage, file_slice)
            size = os.path.getsize(local)
            storage.move_in(local, marker.data_file_path)
        yield delta_write_stat(RECORD_INDEX, file_slice, name, size, upserts, len(deletes))

    def _slice(self, partition: str, index: int) -> FileSlice:
        file_id = MetadataPartition(partition).file_group_id(index)
        return self.slices.get((partition, file_id)) or FileSlice(partition, file_id, "")

    def _marker(self, storage: Storage, file_slice: FileSlice) -> tuple[Marker, LogFileName]:
        """The task's log file in `file_slice`: its APPEND marker, created, and its name."""
        # The catch-up's changes come before every log a writer wrote after the mark: on
        # layout 1, where a slice's log files sort by version, then write token, it takes
        # version 1 beside the build's empty log file (token 0-0-0), ahead of the writers'.
        named_by = self.timeline_layout.log_file_instant(
            file_slice.base_instant_time, self.instant_time
        )
        name = LogFileName(file_slice.file_id, named_by, 1, task_write_token())
        marker = Marker(file_slice.partition_path, str(name), MarkerType.APPEND)
        create_marker(storage, self.instant_time, marker)
        return marker, name


def _piece_cells(pieces: Iterator[SortedPiece]) -> Iterator[tuple[str, bytes]]:
    for piece in pieces:
        yield from zip(piece.keys.to_pylist(), piece.values.to_pylist(), strict=True)


def _layout(reader: MetadataTableReader, spec: IndexSpec, instant_time: str) -> FileGroupLayout:
    counts: list[tuple[str, int]] = []
    reasons: list[str] = []
    for partition in spec.partitions:
        count = reader.file_group_count(partition)
        if count == 0:
            reasons.append(f"metadata partition {partition} has no file groups (build it first)")
        counts.append((partition, count))
    if reader.timeline.get(instant_time) is not None:
        reasons.append(f"the metadata table already has instant {instant_time}")
    if reasons:
        raise UnsupportedTableError("cannot catch up the index: " + "; ".join(reasons))
    return FileGroupLayout(tuple(counts))


def _work_items(
    table: DataTable,
    spec: IndexSpec,
    changes: Changes,
    after: Timeline,
) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The first stage's items, and the touched partitions left without files."""
    items: list[tuple[Any, ...]] = []
    partitions = sorted(changes.partitions)
    if RECORD_INDEX in spec.partitions and changes.file_groups:
        touched = sorted({p for p, _ in changes.file_groups})
        for piece in latest_slices(table, after, touched):
            if (piece.partition_path, piece.file_id) in changes.file_groups:
                items.append((RECORD_INDEX, piece))
    if COLUMN_STATS in spec.partitions:
        for (partition, name), path in sorted(changes.new_files.items()):
            if name not in changes.deleted_files.get(partition, set()):
                items.append((COLUMN_STATS, partition, path))
        for partition, names in sorted(changes.deleted_files.items()):
            items += [(CLEANED, partition, name) for name in sorted(names)]
    emptied: list[str] = []
    if PARTITION_STATS in spec.partitions and partitions:
        slices = latest_slices(table, after, partitions)
        items += [(RANGES, s) for s in slices if s.base_file is not None]
        with_files = {s.partition_path for s in slices if s.base_file is not None}
        emptied = [p for p in partitions if p not in with_files]
    return items, emptied


def catch_up(
    spark: Any,
    table: DataTable,
    spec: IndexSpec,
    instants: Sequence[Instant],
    *,
    since: str,
    until: str,
    instant_time: str,
    timeline: Timeline | None = None,
    memory_budget: int,
) -> IndexWrite:
    """Apply the completed data instants after `since` up to `until` to the partitions of
    `spec`, as the metadata table's completed delta commit `instant_time` of log files; each
    task merges its slice within `memory_budget` bytes of records."""
    if not instants:
        return IndexWrite(0, 0, 0, 0, 0)
    outside = [i.requested_time for i in instants if not since < i.requested_time <= until]
    if outside:
        raise ValueError(f"instants {', '.join(outside)} are not after {since} up to {until}")
    timeline = timeline or table.timeline()
    reader = open_metadata_table(table, timeline)
    layout = _layout(reader, spec, instant_time)
    changes = changes_of(timeline, instants)
    after = _cut_applying(timeline, since, until, instants)
    items, emptied = _work_items(table, spec, changes, after)
    reading = SliceReading.of(table, after, spec.columns, spec.version, memory_budget=memory_budget)
    work = _Work(reading, spec.columns, spec.version, table.base_path)
    index = None
    if RECORD_INDEX in spec.partitions:
        valid = frozenset(
            i.requested_time
            for i in reader.timeline.completed()
            if i.requested_time in reader.valid_instants
        )
        slices = tuple(reader.file_slices(RECORD_INDEX))
        index = _IndexState(slices, valid, frozenset(changes.file_groups), memory_budget)
    schema = writer_schema(table.config.table_version, reader.written_schema)
    storage, config = reader.storage, reader.config
    inflight = start_delta_commit(storage, config, instant_time, OPERATION)

    sc = spark.sparkContext
    sc.setJobDescription(f"tms index catch-up {instant_time} of {table.name}")
    found = sc.parallelize(items, max(len(items), 1)).flatMap(work)
    records = records_only(found)
    if PARTITION_STATS in spec.partitions:
        cleared = [
            (PARTITION_STATS, key, stats_record(key, payload, partition_stats=True))
            for partition in emptied
            for key, payload in partition_deletion_entries(partition, spec.columns, spec.version)
        ]
        merged = ranges_by_partition(found).flatMap(_PartitionStats(spec.columns, dict(spec.types)))
        records = records.union(merged).union(sc.parallelize(cleared, 1))
    writer_slices = {
        (partition, file_id): piece
        for partition in spec.partitions
        for file_id, piece in reader.writer_file_slices(partition).items()
    }
    task = _LogTask(
        layout,
        storage.base_path,
        instant_time,
        schema,
        index,
        TimelineLayout.of(config),
        writer_slices,
    )
    stats: list[WriteStat] = (by_file_group(records, layout).mapPartitionsWithIndex(task)).collect()
    delete_unreported_files(storage, instant_time, {s.path for s in stats if s.path})
    complete_delta_commit(storage, config, inflight, OPERATION, schema, stats)
    delete_markers(storage, instant_time)
    return IndexWrite(
        file_groups=len(stats),
        files_written=len(stats),
        bytes_written=sum(s.total_write_bytes for s in stats),
        records_written=sum(s.num_writes + s.num_deletes for s in stats),
        data_file_groups=len(changes.file_groups),
        record_keys=sum(
            s.num_writes + s.num_deletes for s in stats if s.partition_path == RECORD_INDEX
        ),
    )
