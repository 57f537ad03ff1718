"""Applying records to the metadata table as one delta commit, as Hudi 1.x does before it
commits the data table instant of the same time.

The delta commit moves requested → inflight → completed on the metadata table's timeline.
Each file group a record routes to gets one new log file, with a marker written first; it holds
one HFile data block of the file group's records, cells sorted by key, and a delete block when
keys are deleted. The completed instant carries commit metadata with one delta write stat per
log file, operation `UPSERT_PREPPED` and the record schema, as Hudi writes them.

The two timeline layouts differ in the log file's name (`new_log_file`): on table versions 8
and 9 (layout 2, Avro commit metadata, completion time in the instant's file name) it is
`.<fileId>_<instant>.log.1_<token>`, named by the delta commit; on table version 6 (layout 1,
JSON commit metadata, as Hudi 0.14/0.15 and Hudi 1.x writing version 6 do) it is
`.<fileId>_<base instant>.log.<next version>_<token>` in the file group's writer slice: the
slice of a pending metadata compaction where there is one, so the compaction never misses it.

Refused before anything is written (`UnsupportedTableError`): a metadata timeline whose layout
is not the one of the table version, a partition the data table does not list as built or
lists as inflight (someone else is building it), a partition kind we do not know, a partitioned
record index, a partition without file groups, and an instant the metadata table already has.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import BlockType, DeleteRecord, HeaderKey
from tms.hudi.files.log_writer import encode_delete_block, encode_log_block, log_block_frame
from tms.hudi.files.marked_files import delete_unreported_files
from tms.hudi.files.markers import (
    Marker,
    MarkerType,
    create_marker,
    delete_markers,
)
from tms.hudi.files.names import DEFAULT_WRITE_TOKEN, LogFileName
from tms.hudi.files.new_log_file import next_log_file_name
from tms.hudi.hfile import Compression, HFileWriter
from tms.hudi.hfile.format import FileInfoKey
from tms.hudi.metadata.cells import Cell, record_cells
from tms.hudi.metadata.partitions import MetadataPartition, PartitionKind
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import META_FIELDS, MetadataRecord, combine
from tms.hudi.metadata.schema import layout_mismatch, writer_schema
from tms.hudi.metadata.slice_reader import SCHEMA_INFO_KEY
from tms.hudi.metadata.updates import MetadataUpdate
from tms.hudi.properties import METADATA_PARTITIONS_INFLIGHT
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.layout import TimelineLayout
from tms.hudi.timeline.transitions import request, transition

__all__ = [
    "DeltaCommit",
    "FileGroupLog",
    "PendingDeltaCommit",
    "begin_delta_commit",
    "delta_write_stat",
    "finish_delta_commit",
    "frame_hfile_log",
    "hfile_content",
    "hfile_log_block",
    "hfile_writer",
    "log_file_content",
    "log_write_stat",
    "write_delta_commit",
]

_COPY_BYTES = 1 << 20
OPERATION = "UPSERT_PREPPED"
"""The write operation of every metadata table delta commit."""
KV_COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
"""The comparator Hudi names in the trailer of the metadata table's HFiles."""


@dataclass(frozen=True)
class DeltaCommit:
    instant_time: str
    completion_time: str | None
    log_files: tuple[str, ...]
    """Paths relative to the metadata table's base path."""


@dataclass(frozen=True)
class FileGroupLog:
    """What one file group's log file of a delta commit holds: the cells of its records,
    sorted by key, and the keys it deletes."""

    partition: str
    file_slice: FileSlice
    cells: Sequence[Cell]
    deletes: list[str]


def _refusals(reader: MetadataTableReader, instant_time: str, update: MetadataUpdate) -> list[str]:
    reasons: list[str] = []
    version = reader.data_config.table_version
    mismatch = layout_mismatch(version, reader.config.timeline_layout_version)
    if mismatch:
        reasons.append(mismatch)
    built = set(reader.data_config.metadata_partitions)
    inflight = {
        p.strip() for p in reader.data_config.get(METADATA_PARTITIONS_INFLIGHT).split(",") if p
    }
    for partition in update.partitions:
        if partition in inflight and not reader.file_slices(partition):
            reasons.append(
                f"metadata partition {partition} is being built and has no file groups yet"
            )
        elif partition not in built and partition not in inflight:
            reasons.append(f"metadata partition {partition} is not built on this table")
        try:
            kind = MetadataPartition(partition).kind
        except ValueError:
            reasons.append(f"metadata partition {partition} is of a kind we do not know")
            continue
        definition = reader.index_definitions.get(partition)
        if kind is PartitionKind.RECORD_INDEX and definition and definition.is_partitioned:
            reasons.append("a partitioned record index is not written")
        if partition in built and not reader.file_slices(partition):
            reasons.append(f"metadata partition {partition} has no file groups")
    if reader.timeline.get(instant_time) is not None:
        reasons.append(f"the metadata table already has instant {instant_time}")
    return reasons


def _plan(reader: MetadataTableReader, update: MetadataUpdate, schema: str) -> list[FileGroupLog]:
    """Records and deletes routed to their file groups; records of one key combined."""
    writes: list[FileGroupLog] = []
    for partition in update.partitions:
        slices = reader.file_slices(partition)
        writer_slices = reader.writer_file_slices(partition)
        owner = MetadataPartition(partition)
        definition = reader.index_definitions.get(partition)
        version = definition.version if definition else 1
        records: dict[int, dict[str, MetadataRecord | None]] = defaultdict(dict)
        deletes: dict[int, list[str]] = defaultdict(list)
        for record in update.records.get(partition, []):
            group = records[owner.file_group_of(record.key, len(slices), version)]
            group[record.key] = combine(group.get(record.key), record)
        for key in update.deletes.get(partition, []):
            deletes[owner.file_group_of(key, len(slices), version)].append(key)
        for index in sorted(set(records) | set(deletes)):
            kept = record_cells((r for r in records[index].values() if r is not None), schema)
            file_slice = writer_slices[slices[index].file_id]
            writes.append(FileGroupLog(partition, file_slice, kept, deletes[index]))
    return writes


def hfile_content(
    schema: str, cells: Iterable[Cell], file_info: Mapping[bytes, bytes] | None = None
) -> bytes:
    """An HFile of `cells` (sorted by key) as the metadata table holds them: in a data block
    of a log file, or as a base file (whose `file_info` adds its key range)."""
    writer = hfile_writer(schema)
    writer.append_cells(cells)
    for key, value in (file_info or {}).items():
        writer.add_file_info(key, value)
    return writer.finish()


def hfile_writer(schema: str, path: str | None = None) -> HFileWriter:
    """An HFile writer set up as the metadata table writes its files: gzip, HBase's KeyValue
    comparator, the schema and the time of writing in the file info; in memory, or written
    block by block to the local file `path`."""
    created = struct.pack(">q", int(time.time() * 1000))
    return HFileWriter(
        path,
        compression=Compression.GZ,
        comparator_class_name=KV_COMPARATOR,
        file_info={SCHEMA_INFO_KEY: schema.encode("utf-8"), FileInfoKey.CREATE_TIME_TS: created},
    )


def hfile_log_block(instant_time: str, schema: str, hfile: bytes) -> bytes:
    """A log file's HFile data block holding `hfile`."""
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema}
    return encode_log_block(BlockType.HFILE_DATA, header, hfile)


def frame_hfile_log(
    local_log: str,
    local_hfile: str | None,
    content_length: int,
    instant_time: str,
    schema: str,
    after: bytes = b"",
) -> None:
    """Write the local log file `local_log`: an HFile data block holding the local HFile
    `local_hfile` (copied a MiB at a time, then removed; none when None), then `after` (more
    blocks, e.g. a delete block). A large HFile is never held in memory."""
    with open(local_log, "wb") as out:
        if local_hfile is not None:
            header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema}
            before, footer = log_block_frame(BlockType.HFILE_DATA, header, content_length)
            out.write(before)
            with open(local_hfile, "rb") as content:
                shutil.copyfileobj(content, out, _COPY_BYTES)
            out.write(footer)
            os.remove(local_hfile)
        out.write(after)


def log_file_content(instant_time: str, schema: str, write: FileGroupLog) -> bytes:
    content = b""
    if write.cells:
        content += hfile_log_block(instant_time, schema, hfile_content(schema, write.cells))
    if write.deletes:
        deletes = [DeleteRecord(key, write.partition) for key in write.deletes]
        content += encode_delete_block(instant_time, json.loads(schema), deletes)
    return content


def log_write_stat(write: FileGroupLog, log_name: LogFileName, size: int) -> WriteStat:
    """The delta write stat of one log file, as Hudi's append handle records it: the previous
    commit is the instant the log file is named by; base file and log files are the slice's."""
    return delta_write_stat(
        write.partition, write.file_slice, log_name, size, len(write.cells), len(write.deletes)
    )


def delta_write_stat(
    partition: str,
    file_slice: FileSlice,
    log_name: LogFileName,
    size: int,
    writes: int,
    deletes: int,
) -> WriteStat:
    """`log_write_stat` of a log file of `writes` records and `deletes` deletes."""
    base_file = file_slice.base_file
    earlier = [log.file_name for log in file_slice.log_files if log.name != log_name]
    return WriteStat(
        file_id=file_slice.file_id,
        path=f"{partition}/{log_name}",
        prev_commit=log_name.base_instant_time,
        num_writes=writes,
        num_deletes=deletes,
        num_update_writes=writes,
        total_write_bytes=size,
        partition_path=partition,
        file_size_in_bytes=size,
        log_version=log_name.version,
        log_offset=0,
        base_file=base_file.file_name if base_file else "",
        log_files=[*earlier, str(log_name)],
    )


def record_schema_without_meta_fields(schema: str) -> str:
    """The schema commit metadata records: `HoodieMetadataRecord` without Hudi's meta fields."""
    parsed = json.loads(schema)
    parsed["fields"] = [f for f in parsed["fields"] if f["name"] not in META_FIELDS]
    return json.dumps(parsed, separators=(",", ":"))


@dataclass(frozen=True)
class PendingDeltaCommit:
    """A delta commit requested and inflight on the metadata table, whose log files are being
    written: by `finish_delta_commit` on the driver, and by Spark tasks (`record_index_logs`)
    for updates too large for it."""

    reader: MetadataTableReader
    instant_time: str
    schema: str
    partitions: frozenset[str]
    inflight: Instant


def begin_delta_commit(
    data_storage: Storage,
    instant_time: str,
    partitions: Sequence[str],
    *,
    reader: MetadataTableReader | None = None,
) -> PendingDeltaCommit:
    """Request delta commit `instant_time` (the data table instant it belongs to) for updates
    of `partitions`, refused before anything is written when one cannot be kept."""
    reader = reader or MetadataTableReader.open(data_storage)
    reasons = _refusals(reader, instant_time, MetadataUpdate(records={p: [] for p in partitions}))
    if reasons:
        raise UnsupportedTableError(
            f"cannot write metadata delta commit {instant_time}: " + "; ".join(reasons)
        )
    schema = writer_schema(reader.data_config.table_version, reader.written_schema)
    storage, config = reader.storage, reader.config
    pending = request(storage, config, instant_time, Action.DELTA_COMMIT)
    inflight = transition(
        storage, config, pending, State.INFLIGHT, CommitMetadata(operation_type=OPERATION)
    )
    return PendingDeltaCommit(reader, instant_time, schema, frozenset(partitions), inflight)


def finish_delta_commit(
    pending: PendingDeltaCommit, update: MetadataUpdate, written: Sequence[WriteStat] = ()
) -> DeltaCommit:
    """Write `update`'s log files and complete the delta commit with them and the log files
    tasks wrote (`written`). Files of failed task attempts (a marker, no write stat) go."""
    outside = set(update.partitions) - pending.partitions
    if outside:
        raise ValueError(f"delta commit {pending.instant_time} was not begun for {outside}")
    reader, instant_time, schema = pending.reader, pending.instant_time, pending.schema
    storage, config = reader.storage, reader.config
    metadata = CommitMetadata(
        operation_type=OPERATION,
        extra_metadata={"schema": record_schema_without_meta_fields(schema)},
    )
    layout = TimelineLayout.of(config)
    paths: list[str] = []
    for write in _plan(reader, update, schema):
        name = next_log_file_name(layout, write.file_slice, instant_time, DEFAULT_WRITE_TOKEN)
        marker = Marker(write.partition, str(name), MarkerType.APPEND)
        create_marker(storage, instant_time, marker)
        content = log_file_content(instant_time, schema, write)
        storage.write_bytes(marker.data_file_path, content, atomic=False)
        metadata.add_write_stat(write.partition, log_write_stat(write, name, len(content)))
        paths.append(marker.data_file_path)
    for stat in written:
        metadata.add_write_stat(stat.partition_path or "", stat)
        paths.append(stat.path or "")
    delete_unreported_files(storage, instant_time, set(paths))
    done = transition(storage, config, pending.inflight, State.COMPLETED, metadata)
    delete_markers(storage, instant_time)
    return DeltaCommit(instant_time, done.completion_time, tuple(paths))


def write_delta_commit(
    data_storage: Storage,
    instant_time: str,
    update: MetadataUpdate,
    *,
    reader: MetadataTableReader | None = None,
) -> DeltaCommit:
    """Write `update` as the metadata table's delta commit `instant_time` (the data table
    instant it belongs to); returns the log files written."""
    pending = begin_delta_commit(data_storage, instant_time, update.partitions, reader=reader)
    return finish_delta_commit(pending, update)
