"""The files of new metadata partitions, as Hudi's `initializeFileGroups` and its bulk insert
lay them out: every file group starts with a log file holding an empty delete block (written
with token `0-0-0`, so a file group exists even when no record routes to it), and the file
groups that get records get a base HFile `<fileId>_<writeToken>_<instant>.hfile` (cells sorted
by key, a CREATE marker first). The delta commit's write stats name the base files only, with
operation `BULK_INSERT_PREPPED`, as the fixtures' indexing delta commits do.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.write_stat import NULL_COMMIT, RuntimeStats, WriteStat
from tms.hudi.files.log_writer import encode_empty_delete_block
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.memory import task_workdir
from tms.hudi.metadata.compaction import HFILE_EXTENSION, MAX_RECORD_KEY, MIN_RECORD_KEY
from tms.hudi.metadata.partitions import MetadataPartition
from tms.hudi.metadata.sorted_cells import (
    RepeatedKeyError,
    Repeats,
    SortedCells,
    append_piece,
)
from tms.hudi.metadata.writer import hfile_writer, record_schema_without_meta_fields
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import request, transition

__all__ = [
    "BULK_INSERT_OPERATION",
    "CellPart",
    "FileGroupLayout",
    "FileGroupWrite",
    "NewFileGroup",
    "complete_delta_commit",
    "start_delta_commit",
    "write_new_file_group",
]

BULK_INSERT_OPERATION = "BULK_INSERT_PREPPED"
INIT_WRITE_TOKEN = "0-0-0"
"""The write token of the empty log file that starts each new file group."""


@dataclass(frozen=True)
class FileGroupLayout:
    """The file groups of the partitions one build writes, numbered end to end, so one
    shuffle partition (and one task) writes one file group."""

    counts: tuple[tuple[str, int], ...]
    """(metadata partition, its file group count), in build order."""

    @property
    def total(self) -> int:
        return sum(count for _, count in self.counts)

    def count(self, partition: str) -> int:
        return dict(self.counts)[partition]

    def _offset(self, partition: str) -> tuple[int, int]:
        """(number of `partition`'s first file group, its file group count)."""
        offset = 0
        for name, count in self.counts:
            if name == partition:
                return offset, count
            offset += count
        raise KeyError(partition)

    def route(self, partition: str, key: str) -> int:
        """The file group (numbered end to end) a key of `partition` is written to."""
        offset, count = self._offset(partition)
        return offset + MetadataPartition(partition).file_group_of(key, count)

    def route_keys(self, partition: str, keys: Sequence[str]) -> dict[int, list[str]]:
        """`route` of many keys at once: the keys of each file group (numbered end to end)."""
        offset, count = self._offset(partition)
        groups = MetadataPartition(partition).keys_by_file_group(keys, count)
        return {offset + index: group for index, group in groups.items()}

    def locate(self, number: int) -> tuple[str, int]:
        """(metadata partition, file group index) of a file group numbered end to end."""
        for name, count in self.counts:
            if number < count:
                return name, number
            number -= count
        raise IndexError(number)


@dataclass(frozen=True)
class NewFileGroup:
    """What a task writing one new file group needs (small and picklable)."""

    metadata_path: str
    instant_time: str
    schema: str
    memory_budget: int
    """Bytes of cells the task holds while it sorts them (spilling past them)."""


@dataclass(frozen=True)
class FileGroupWrite:
    """What a task wrote: the base file's write stat (None without records) and the log file."""

    stat: WriteStat | None
    log_bytes: int


CellPart = tuple[pa.Array, pa.Array]
"""Cells given part by part: keys (strings) and their values (binary), as Arrow columns."""


def write_new_file_group(
    target: NewFileGroup,
    partition: str,
    index: int,
    cells: Iterable[CellPart],
    write_token: str,
) -> FileGroupWrite:
    """Write file group `index` of `partition`: its empty log file and, with records, its base
    HFile of `cells`, which must name each key once. The cells are sorted through local disk
    past the budget and the HFile is written block by block, then moved into place."""
    started = time.perf_counter()
    storage = Storage(target.metadata_path)
    file_id = MetadataPartition(partition).file_group_id(index)
    empty = encode_empty_delete_block(target.instant_time)
    log_name = LogFileName(file_id, target.instant_time, 1, INIT_WRITE_TOKEN)
    storage.write_bytes(f"{partition}/{log_name}", empty)
    with task_workdir() as workdir:
        ordered = SortedCells(target.memory_budget, workdir, Repeats.REFUSE)
        for keys, values in cells:
            ordered.add(0, keys, values)
        if not ordered.count:
            return FileGroupWrite(None, len(empty))
        name = str(BaseFileName(file_id, write_token, target.instant_time, HFILE_EXTENSION))
        marker = Marker(partition, name, MarkerType.CREATE)
        create_marker(storage, target.instant_time, marker)
        local = os.path.join(workdir, name)
        first: str | None = None
        last = ""
        try:
            with hfile_writer(target.schema, local) as writer:
                for piece in ordered.pieces():
                    append_piece(writer, piece)
                    first = piece.keys[0].as_py() if first is None else first
                    last = piece.keys[-1].as_py()
                writer.add_file_info(MIN_RECORD_KEY, (first or "").encode("utf-8"))
                writer.add_file_info(MAX_RECORD_KEY, last.encode("utf-8"))
        except RepeatedKeyError as repeated:
            raise ValueError(
                f"{partition}: {repeated} by the data table (a record key in two file "
                "groups?); the index cannot hold it once"
            ) from repeated
        size = os.path.getsize(local)
        storage.move_in(local, marker.data_file_path)
    count = ordered.count
    stat = WriteStat(
        file_id=file_id,
        path=marker.data_file_path,
        prev_commit=NULL_COMMIT,
        num_writes=count,
        num_inserts=count,
        total_write_bytes=size,
        partition_path=partition,
        file_size_in_bytes=size,
        runtime_stats=RuntimeStats(total_create_time=int((time.perf_counter() - started) * 1000)),
    )
    return FileGroupWrite(stat, len(empty))


def start_delta_commit(
    storage: Storage, config: TableConfig, instant_time: str, operation: str
) -> Instant:
    """The metadata table's delta commit `instant_time`, requested then inflight."""
    requested = request(storage, config, instant_time, Action.DELTA_COMMIT)
    return transition(
        storage, config, requested, State.INFLIGHT, CommitMetadata(operation_type=operation)
    )


def complete_delta_commit(
    storage: Storage,
    config: TableConfig,
    inflight: Instant,
    operation: str,
    schema: str,
    stats: Sequence[WriteStat],
) -> Instant:
    """Complete the delta commit with one write stat per file written."""
    metadata = CommitMetadata(
        operation_type=operation,
        extra_metadata={"schema": record_schema_without_meta_fields(schema)},
    )
    for stat in stats:
        metadata.add_write_stat(stat.partition_path or "", stat)
    return transition(storage, config, inflight, State.COMPLETED, metadata)
