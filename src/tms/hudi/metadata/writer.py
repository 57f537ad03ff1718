"""Applying records to the metadata table as one delta commit, as Hudi 1.x does before it
commits the data table instant of the same time.

The delta commit moves requested → inflight → completed on the metadata table's timeline
(layout 2, named by its completion time). Each file group a record routes to gets one new log
file named by the delta commit (`.<fileId>_<instant>.log.1_<token>`, Hudi 1.x's naming), with a
marker written first; it holds one HFile data block of the file group's records, cells sorted
by key, and a delete block when keys are deleted. The completed instant carries Avro commit
metadata with one delta write stat per log file, operation `UPSERT_PREPPED` and the record
schema, as Hudi writes them.

Refused before anything is written (`UnsupportedTableError`): table versions before 8 (Hudi
0.x appends to its slices' log files, named by base instant; we do not write that layout),
a partition the data table does not list as built or lists as inflight (someone else is
building it), a partition kind we do not know, a partitioned record index, a partition without
file groups, and an instant the metadata table already has.
"""

from __future__ import annotations

import json
import struct
import time
from collections import defaultdict
from dataclasses import dataclass

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import BlockType, DeleteRecord, HeaderKey
from tms.hudi.files.log_writer import encode_delete_block, encode_log_block
from tms.hudi.files.markers import Marker, MarkerType, create_marker, delete_markers
from tms.hudi.files.names import DEFAULT_WRITE_TOKEN, LogFileName
from tms.hudi.hfile import Compression, HFileWriter
from tms.hudi.hfile.format import FileInfoKey
from tms.hudi.metadata.partitions import MetadataPartition, PartitionKind
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import META_FIELDS, MetadataRecord, combine
from tms.hudi.metadata.schema import FIRST_1X_TABLE_VERSION, encode_record, writer_schema
from tms.hudi.metadata.slice_reader import SCHEMA_INFO_KEY
from tms.hudi.metadata.updates import MetadataUpdate
from tms.hudi.properties import METADATA_PARTITIONS_INFLIGHT
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import request, transition

__all__ = [
    "DeltaCommit",
    "FileGroupLog",
    "hfile_content",
    "log_file_content",
    "log_write_stat",
    "write_delta_commit",
]

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
    """What one file group's log file of a delta commit holds."""

    partition: str
    file_slice: FileSlice
    records: list[MetadataRecord]
    deletes: list[str]


def _refusals(reader: MetadataTableReader, instant_time: str, update: MetadataUpdate) -> list[str]:
    reasons: list[str] = []
    version = reader.data_config.table_version
    if version < FIRST_1X_TABLE_VERSION:
        reasons.append(
            f"table version {version}: Hudi 0.x appends metadata log blocks to each slice's "
            "log file named by its base instant, a layout we do not write"
        )
    if reader.config.timeline_layout_version < 2:
        reasons.append("the metadata table's timeline is not layout 2")
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


def _plan(reader: MetadataTableReader, update: MetadataUpdate) -> list[FileGroupLog]:
    """Records and deletes routed to their file groups; records of one key combined."""
    writes: list[FileGroupLog] = []
    for partition in update.partitions:
        slices = reader.file_slices(partition)
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
            kept = [r for r in records[index].values() if r is not None]
            kept.sort(key=lambda r: r.key.encode("utf-8"))
            writes.append(FileGroupLog(partition, slices[index], kept, deletes[index]))
    return writes


def hfile_content(schema: str, records: list[MetadataRecord]) -> bytes:
    """An HFile of `records` (sorted by key) as the metadata table holds them: in a data
    block of a log file, or as a base file."""
    created = struct.pack(">q", int(time.time() * 1000))
    writer = HFileWriter(
        compression=Compression.GZ,
        comparator_class_name=KV_COMPARATOR,
        file_info={SCHEMA_INFO_KEY: schema.encode("utf-8"), FileInfoKey.CREATE_TIME_TS: created},
    )
    for record in records:
        writer.append(record.key.encode("utf-8"), encode_record(record.fields, schema))
    return writer.finish()


def _hfile_block(instant_time: str, schema: str, records: list[MetadataRecord]) -> bytes:
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema}
    return encode_log_block(BlockType.HFILE_DATA, header, hfile_content(schema, records))


def log_file_content(instant_time: str, schema: str, write: FileGroupLog) -> bytes:
    content = b""
    if write.records:
        content += _hfile_block(instant_time, schema, write.records)
    if write.deletes:
        deletes = [DeleteRecord(key, write.partition) for key in write.deletes]
        content += encode_delete_block(instant_time, json.loads(schema), deletes)
    return content


def log_write_stat(write: FileGroupLog, instant_time: str, log_name: str, size: int) -> WriteStat:
    return WriteStat(
        file_id=write.file_slice.file_id,
        path=f"{write.partition}/{log_name}",
        prev_commit=instant_time,
        num_writes=len(write.records),
        num_deletes=len(write.deletes),
        num_update_writes=len(write.records),
        total_write_bytes=size,
        partition_path=write.partition,
        file_size_in_bytes=size,
        log_version=1,
        log_offset=0,
        base_file="",
        log_files=[log_name],
    )


def record_schema_without_meta_fields(schema: str) -> str:
    """The schema commit metadata records: `HoodieMetadataRecord` without Hudi's meta fields."""
    parsed = json.loads(schema)
    parsed["fields"] = [f for f in parsed["fields"] if f["name"] not in META_FIELDS]
    return json.dumps(parsed, separators=(",", ":"))


def write_delta_commit(
    data_storage: Storage,
    instant_time: str,
    update: MetadataUpdate,
    *,
    reader: MetadataTableReader | None = None,
) -> DeltaCommit:
    """Write `update` as the metadata table's delta commit `instant_time` (the data table
    instant it belongs to); returns the log files written."""
    reader = reader or MetadataTableReader.open(data_storage)
    reasons = _refusals(reader, instant_time, update)
    if reasons:
        raise UnsupportedTableError(
            f"cannot write metadata delta commit {instant_time}: " + "; ".join(reasons)
        )
    schema = writer_schema(reader.data_config.table_version, None)
    writes = _plan(reader, update)
    storage, config = reader.storage, reader.config
    pending = request(storage, config, instant_time, Action.DELTA_COMMIT)
    inflight_metadata = CommitMetadata(operation_type=OPERATION)
    pending = transition(storage, config, pending, State.INFLIGHT, inflight_metadata)
    metadata = CommitMetadata(
        operation_type=OPERATION,
        extra_metadata={"schema": record_schema_without_meta_fields(schema)},
    )
    written: list[str] = []
    for write in writes:
        name = str(LogFileName(write.file_slice.file_id, instant_time, 1, DEFAULT_WRITE_TOKEN))
        marker = Marker(write.partition, name, MarkerType.APPEND)
        create_marker(storage, instant_time, marker)
        content = log_file_content(instant_time, schema, write)
        storage.write_bytes(marker.data_file_path, content, atomic=False)
        metadata.add_write_stat(
            write.partition, log_write_stat(write, instant_time, name, len(content))
        )
        written.append(marker.data_file_path)
    done = transition(storage, config, pending, State.COMPLETED, metadata)
    delete_markers(storage, instant_time)
    return DeltaCommit(instant_time, done.completion_time, tuple(written))
