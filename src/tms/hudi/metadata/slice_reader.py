"""One file slice of the metadata table read into records: its base HFile, then its log blocks
merged by key, as Hudi's metadata log record reader does.

Log blocks are taken in write order; a block counts only when `valid` accepts its instant; a
rollback command block voids the blocks of its target instant read before it in the slice;
corrupted blocks are skipped. HFile data blocks hold an HFile whose cells are key → record;
delete blocks delete keys. Records of one key combine with `records.combine`, the base file's
record first.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass

from tms.hudi.errors import LogFormatError
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import BlockType, HeaderKey, LogBlock
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.files.reader import merge_order
from tms.hudi.hfile import HFileReader
from tms.hudi.metadata.records import MetadataRecord, combine
from tms.hudi.metadata.schema import decode_record
from tms.hudi.storage import Storage

__all__ = [
    "METADATA_BLOCKS",
    "SliceRecords",
    "applying_rollbacks",
    "hfile_records",
    "read_slice",
    "slice_blocks",
    "slice_schema",
]

METADATA_BLOCKS = frozenset(BlockType) - {BlockType.COMMAND, BlockType.CORRUPTED}
"""The blocks a metadata table slice's merge counts: its records and deletes (HFile data
blocks; any other kind is read as its reader reads it, or refused)."""

SCHEMA_INFO_KEY = b"schema"
"""File info key of the writer schema in a metadata HFile (base file or data block)."""

Merged = dict[str, MetadataRecord | None]
"""Key → record, None for a deleted key."""


@dataclass(frozen=True)
class SliceRecords:
    """What a slice holds: the base file's records and the merged log records (deletes kept)."""

    base: dict[str, MetadataRecord]
    log: Merged

    def merged(self) -> dict[str, MetadataRecord]:
        """The live records, base and log combined."""
        out: dict[str, MetadataRecord] = {}
        for key in self.base.keys() | self.log.keys():
            if key in self.log:
                record = combine(self.base.get(key), self.log[key])
            else:
                record = self.base[key]
            if record is not None:
                out[key] = record
        return out


def hfile_records(
    reader: HFileReader, keys: Collection[str] | None = None
) -> Iterator[MetadataRecord]:
    """Records of an HFile (a base file or a data block's content), or only of `keys`."""
    schema = reader.file_info.get(SCHEMA_INFO_KEY)
    if schema is None:
        raise LogFormatError("a metadata HFile carries no writer schema in its file info")
    text = schema.decode("utf-8")
    if keys is None:
        cells = reader.entries()
    else:
        cells = ((k.encode(), v) for k in sorted(keys) for v in reader.get_all(k))
    for cell, value in cells:
        yield MetadataRecord(cell.decode("utf-8"), decode_record(value, text))


def slice_schema(storage: Storage, file_slice: FileSlice) -> str | None:
    """The writer schema the slice's base file carries, else its first data block's."""
    if file_slice.base_file is not None:
        with storage.open_ranged(file_slice.base_file.path) as base:  # its trailer and file info
            schema = HFileReader(base).file_info.get(SCHEMA_INFO_KEY)
        if schema:
            return schema.decode("utf-8")
    for block in slice_blocks(storage, file_slice):
        if block.block_type is BlockType.HFILE_DATA and block.header.get(HeaderKey.SCHEMA):
            return block.header[HeaderKey.SCHEMA]
    return None


def slice_blocks(storage: Storage, file_slice: FileSlice) -> list[LogBlock]:
    """The slice's log blocks in write order, rollback command blocks applied."""
    return applying_rollbacks(
        block
        for log in file_slice.log_files
        for block in read_log_blocks(storage.read_bytes(log.path))
    )


def applying_rollbacks(blocks: Iterable[LogBlock]) -> list[LogBlock]:
    """Log blocks in write order without corrupted ones, and without the blocks a rollback
    command block read after them voids (its target instant's), nor the command itself."""
    kept: list[LogBlock] = []
    for block in blocks:
        if block.block_type is BlockType.CORRUPTED:
            continue
        if block.is_rollback:
            target = block.target_instant_time
            kept = [b for b in kept if b.instant_time != target]
            continue
        kept.append(block)
    return kept


def _block_records(block: LogBlock, keys: Collection[str] | None) -> Iterator[MetadataRecord]:
    if block.block_type is BlockType.HFILE_DATA:
        yield from hfile_records(HFileReader(block.content), keys)
    elif block.block_type is BlockType.AVRO_DATA:  # not written by Hudi for this table; read
        for record in block.records:
            key = str(record["key"])
            if keys is None or key in keys:
                yield MetadataRecord(key, dict(record))


def read_slice(
    storage: Storage,
    file_slice: FileSlice,
    valid: Callable[[str], bool],
    keys: Collection[str] | None = None,
) -> SliceRecords:
    """The records of one slice (only of `keys` when given: the base file is then searched
    through its block index, not scanned)."""
    wanted = None if keys is None else set(keys)
    log: Merged = {}
    blocks = slice_blocks(storage, file_slice)
    for block in (blocks[i] for i in merge_order(blocks, valid, METADATA_BLOCKS)):
        if block.block_type is BlockType.DELETE:
            for deleted in block.deletes:
                if wanted is None or deleted.record_key in wanted:
                    log[deleted.record_key] = None
            continue
        for record in _block_records(block, wanted):
            log[record.key] = combine(log.get(record.key), record)
    base: dict[str, MetadataRecord] = {}
    if file_slice.base_file is not None and wanted is None:
        reader = HFileReader(storage.read_bytes(file_slice.base_file.path))
        base = {r.key: r for r in hfile_records(reader)}
    elif file_slice.base_file is not None:  # the blocks of the keys alone, by ranged reads
        with storage.open_ranged(file_slice.base_file.path) as ranged:
            base = {r.key: r for r in hfile_records(HFileReader(ranged), wanted)}
    return SliceRecords(base, log)
