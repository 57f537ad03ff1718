"""Record index entries written by the Spark tasks that moved the records, not the driver.

A clustering rewrites whole file groups: every record it moves needs a new `record_index`
location, and a table's worth of keys must not travel to the driver. Each task routes the keys
of the files it wrote to the record index's file groups and writes, into the pending delta
commit (`writer.begin_delta_commit`), one log file per file group it has keys for, named with
its own write token (a marker first, so a failed attempt's file is deleted and a crash rolled
back); it returns the write stats, which the driver adds to the delta commit. The keys of one
delta commit are disjoint across tasks, so readers merging a file group's log files by key see
each key once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.new_log_file import next_log_file_name
from tms.hudi.hfile import HFileWriter
from tms.hudi.memory import DEFAULT_RECORDS, task_workdir
from tms.hudi.metadata.cells import location_value
from tms.hudi.metadata.partitions import RECORD_INDEX, MetadataPartition
from tms.hudi.metadata.records import RecordLocation, instant_millis
from tms.hudi.metadata.sorted_cells import Repeats, SortedCells, append_piece
from tms.hudi.metadata.writer import (
    PendingDeltaCommit,
    delta_write_stat,
    frame_hfile_log,
    hfile_writer,
)
from tms.hudi.storage import Storage
from tms.hudi.timeline.layout import TimelineLayout

__all__ = ["MovedKeys", "RecordIndexLogs", "record_index_logs", "write_record_index_logs"]


@dataclass(frozen=True)
class RecordIndexLogs:
    """What a task needs to write record index log files into a pending delta commit (small,
    picklable)."""

    metadata_uri: str
    instant_time: str
    schema: str
    layout: TimelineLayout
    slices: tuple[FileSlice, ...]
    """The writer slice of each record index file group, in file group order."""
    index_version: int


def record_index_logs(pending: PendingDeltaCommit) -> RecordIndexLogs:
    """The target of the tasks' record index log files in `pending`."""
    reader = pending.reader
    writer_slices = reader.writer_file_slices(RECORD_INDEX)
    slices = tuple(writer_slices[s.file_id] for s in reader.file_slices(RECORD_INDEX))
    definition = reader.index_definitions.get(RECORD_INDEX)
    return RecordIndexLogs(
        reader.storage.uri(""),
        pending.instant_time,
        pending.schema,
        TimelineLayout.of(reader.config),
        slices,
        definition.version if definition else 1,
    )


class MovedKeys:
    """The keys a task moved and their new files, gathered as it writes them: sorted by
    record index file group and key through local disk past `budget` (`SortedCells`), so a
    task holds about the budget whatever the number of keys. A key moved to two new files
    keeps the later file's location."""

    def __init__(self, target: RecordIndexLogs, workdir: str, budget: int) -> None:
        self.target = target
        self.workdir = workdir
        self._cells = SortedCells(budget, os.path.join(workdir, "record-index"), Repeats.LAST)
        self._values: dict[tuple[str, str], bytes] = {}
        self._millis = instant_millis(target.instant_time)

    def add(
        self, partition: str, file_id: str, keys: Iterable[str] | pa.Array | pa.ChunkedArray
    ) -> None:
        """Keys now in the new file `file_id` of `partition` (an Arrow column of strings is
        taken with no Python string made)."""
        column = _key_column(keys)
        if not len(column):
            return
        value = self._values.get((partition, file_id))
        if value is None:  # every key of one new file has the same cell value
            location = RecordLocation(partition, file_id, self._millis)
            value = location_value(location, self.target.schema)
            self._values[(partition, file_id)] = value
        owner = MetadataPartition(RECORD_INDEX)
        groups = owner.file_groups_of(column, len(self.target.slices), self.target.index_version)
        values = pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(len(column), np.int32)), pa.array([value], pa.binary())
        ).cast(pa.binary())
        self._cells.add(groups.astype(np.int32), column, values)

    def write(self, write_token: str) -> list[WriteStat]:
        """One log file per record index file group with keys, in the pending delta commit;
        their write stats. Each HFile is written block by block to local disk, then framed
        as a log block into its log file on the way to storage."""
        storage = Storage(self.target.metadata_uri)
        stats: list[WriteStat] = []
        group: int | None = None
        writer: HFileWriter | None = None
        count = 0
        for piece in self._cells.pieces():
            if piece.group != group:
                if writer is not None and group is not None:
                    stats.append(self._log_file(storage, group, writer, count, write_token))
                group, count = piece.group, 0
                writer = hfile_writer(self.target.schema, self._hfile_path)
            assert writer is not None
            append_piece(writer, piece)
            count += len(piece.keys)
        if writer is not None and group is not None:
            stats.append(self._log_file(storage, group, writer, count, write_token))
        return stats

    @property
    def _hfile_path(self) -> str:
        return os.path.join(self.workdir, "record-index.hfile")

    def _log_file(
        self, storage: Storage, group: int, writer: HFileWriter, count: int, write_token: str
    ) -> WriteStat:
        target = self.target
        content_length = writer.close()
        local = os.path.join(self.workdir, "record-index.log")
        frame_hfile_log(local, self._hfile_path, content_length, target.instant_time, target.schema)
        size = os.path.getsize(local)
        file_slice = target.slices[group]
        name = next_log_file_name(target.layout, file_slice, target.instant_time, write_token)
        marker = Marker(RECORD_INDEX, str(name), MarkerType.APPEND)
        create_marker(storage, target.instant_time, marker)
        storage.move_in(local, marker.data_file_path)
        return delta_write_stat(RECORD_INDEX, file_slice, name, size, count, 0)


def write_record_index_logs(
    target: RecordIndexLogs,
    moved: Iterable[tuple[str, str, Iterable[str] | pa.Array | pa.ChunkedArray]],
    write_token: str,
    *,
    budget: int = DEFAULT_RECORDS,
) -> list[WriteStat]:
    """On an executor: the new locations of `moved` records, given as (partition, file id,
    keys) of each new file, as log files of the record index; their write stats
    (`MovedKeys`, for keys known at once)."""
    with task_workdir() as workdir:
        keys = MovedKeys(target, workdir, budget)
        for partition, file_id, file_keys in moved:
            keys.add(partition, file_id, file_keys)
        return keys.write(write_token)


def _key_column(keys: Iterable[str] | pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """A new file's keys as one Arrow column of strings."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    column = (
        keys.cast(pa.string())
        if isinstance(keys, pa.Array)
        else pa.array(keys if isinstance(keys, Sequence) else list(keys), pa.string())
    )
    if column.null_count:
        raise ValueError("a record key is null")
    return column
