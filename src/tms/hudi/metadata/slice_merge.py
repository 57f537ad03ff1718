"""One file slice of the metadata table merged as a stream of keys, for its compaction: the
records `slice_reader.read_slice(...).merged()` gives, key by key in key order, without
holding the slice.

Every source is sorted by key: the base HFile, and each log block (an HFile data block's
cells are sorted; a delete block's keys are sorted through local disk, `ExternalSort`). The
sources are read from local files a block at a time (the base file and log files are local
copies on an object store; a log block's content is left in its file) and merged by key, the
base file first and the log blocks in write order. A key's log versions fold with
`records.combine` in that order (a delete wins over what came before it), then combine with
its base record, exactly as the reader merges them. The task holds one HFile block per source,
the records of one key, and a delete block's keys up to the memory budget.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tms.hudi.errors import LogFormatError
from tms.hudi.files.external_sort import ExternalSort
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.local_copies import LocalCopies
from tms.hudi.files.log_block import BlockType, LogBlock
from tms.hudi.files.log_reader import avro_record_chunks, delete_record_chunks, iter_log_file
from tms.hudi.files.reader import merge_order
from tms.hudi.hfile import HFileReader
from tms.hudi.metadata.cells import cell_value
from tms.hudi.metadata.partitions import MetadataPartition
from tms.hudi.metadata.records import MetadataRecord, RecordType, combine
from tms.hudi.metadata.schema import decode_record, peek_type
from tms.hudi.metadata.slice_reader import METADATA_BLOCKS, SCHEMA_INFO_KEY, applying_rollbacks
from tms.hudi.storage import Storage

__all__ = ["MergedKey", "StoredValue", "merge_slice_by_key"]

_DELETE_CHUNK = 65_536
"""Keys of a delete block decoded at a time."""
_AVRO_CHUNK = 1 << 20
"""Bytes of an Avro data block decoded at a time."""

_REPLACED_WHOLE = frozenset(
    {RecordType.RECORD_INDEX, RecordType.SECONDARY_INDEX, RecordType.BLOOM_FILTERS}
)
"""Record types of which a newer version replaces the older whole (`records.combine`); files
listings and stats combine field by field."""


@dataclass(frozen=True, slots=True)
class StoredValue:
    """A record as an HFile stores it: its Avro binary under `schema`, decoded only when the
    merge needs its fields (a record index entry is passed through as it is)."""

    raw: bytes
    schema: str


Value = StoredValue | MetadataRecord
Version = tuple[str, int, Value | None]
"""(key, source, value): source 0 is the base file, n the n-th log block; None deletes."""


@dataclass(frozen=True)
class MergedKey:
    """One key of the slice after the merge."""

    key: str
    value: Value | None
    """The live record; None when the log deletes the key."""
    in_base: bool
    in_log: bool

    def record(self) -> MetadataRecord | None:
        """The live record, decoded."""
        return None if self.value is None else _decoded(self.key, self.value)

    def cell(self, schema: str) -> bytes:
        """The live record as a cell value under `schema`: the stored bytes when they are
        already that (same schema, `key` empty), else the record encoded again."""
        value = self.value
        if value is None:
            raise ValueError(f"key {self.key!r} is deleted: it has no cell")
        if isinstance(value, StoredValue) and value.schema == schema:
            peeked = peek_type(value.raw, schema)
            if peeked is not None and peeked[1]:
                return value.raw
        return cell_value(_decoded(self.key, value), schema)


def merge_slice_by_key(
    storage: Storage,
    file_slice: FileSlice,
    valid: Callable[[str], bool],
    *,
    workdir: str,
    budget: int,
) -> Iterator[MergedKey]:
    """The slice's keys in key order (UTF-8 byte order, as HFiles sort them), each merged;
    `valid` accepts the instants whose log blocks count. `workdir` is an empty local folder
    the caller removes afterwards; `budget` bounds the delete keys sorted in memory."""
    with ExitStack() as files:
        local = LocalCopies(storage, workdir)
        sources: list[Iterable[Version]] = []
        if file_slice.base_file is not None:
            base = files.enter_context(open(local.local(file_slice.base_file.path), "rb"))
            sources.append(_stored(HFileReader(base), 0))
        logs = [
            files.enter_context(open(local.local(log.path), "rb")) for log in file_slice.log_files
        ]
        blocks = applying_rollbacks(b for log in logs for b in iter_log_file(log, raw=True))
        order = merge_order(blocks, valid, METADATA_BLOCKS)
        counted = [(number, blocks[i]) for number, i in enumerate(order, start=1)]
        sorting = sum(1 for _, block in counted if block.block_type is BlockType.DELETE)
        share = budget // (2 * max(1, sorting))  # every delete block's sort is open at once
        for number, block in counted:
            sorts = Path(workdir) / f"deletes-{number}"
            sources.append(_block_versions(block, number, sorts, share))
        merged = heapq.merge(*sources, key=_by_key)
        whole = MetadataPartition(file_slice.partition_path).kind.value[2] in _REPLACED_WHOLE
        merge_key = _last_version if whole else _merge_key
        for key, versions in itertools.groupby(merged, key=_by_key):
            yield merge_key(key, versions)


def _by_key(version: Version) -> str:
    return version[0]


def _merge_key(key: str, versions: Iterable[Version]) -> MergedKey:
    """The key's record: its log versions folded in order, then combined with its base
    version (a key written twice in an HFile: the last counts)."""
    base: MetadataRecord | None = None
    log: MetadataRecord | None = None
    in_base = in_log = False
    for _, source, value in versions:
        record = None if value is None else _decoded(key, value)
        if source == 0:
            base, in_base = record, True
        else:
            log, in_log = combine(log, record), True
    return MergedKey(key, combine(base, log) if in_log else base, in_base, in_log)


def _last_version(key: str, versions: Iterable[Version]) -> MergedKey:
    """`_merge_key` of records that a newer version replaces whole: the last version stays
    (the last log version when there is one: the base file's sort first), never decoded."""
    in_base = in_log = False
    last: Value | None = None
    for _, source, value in versions:
        last = value
        if source == 0:
            in_base = True
        else:
            in_log = True
    return MergedKey(key, last, in_base, in_log)


def _decoded(key: str, value: Value) -> MetadataRecord:
    if isinstance(value, MetadataRecord):
        return value
    return MetadataRecord(key, decode_record(value.raw, value.schema))


def _versions(records: Iterable[MetadataRecord], source: int) -> Iterator[Version]:
    for record in records:
        yield record.key, source, record


def _stored(reader: HFileReader, source: int) -> Iterator[Version]:
    """An HFile's cells as stored values, in key order."""
    schema = reader.file_info.get(SCHEMA_INFO_KEY)
    if schema is None:
        raise LogFormatError("a metadata HFile carries no writer schema in its file info")
    text = schema.decode("utf-8")
    for row, raw in reader.entries():
        yield row.decode("utf-8"), source, StoredValue(raw, text)


def _block_versions(block: LogBlock, source: int, sorts: Path, budget: int) -> Iterator[Version]:
    """A block's records (or deletes) sorted by key."""
    if block.block_type is BlockType.HFILE_DATA:
        with block.content_stream(buffered=False) as content:
            yield from _stored(HFileReader(content), source)
    elif block.block_type is BlockType.DELETE:
        yield from _sorted_deletes(block, source, sorts, budget)
    elif block.block_type is BlockType.AVRO_DATA:
        # Hudi never writes one to the metadata table: read, and sorted in memory
        records = [
            MetadataRecord(str(r["key"]), dict(r))
            for chunk in avro_record_chunks(block, _AVRO_CHUNK)
            for r in chunk
        ]
        records.sort(key=lambda record: record.key)
        yield from _versions(records, source)
    elif block.block_type is not BlockType.COMMAND:
        raise LogFormatError(f"a {block.block_type.name} block in the metadata table")


def _sorted_deletes(block: LogBlock, source: int, sorts: Path, budget: int) -> Iterator[Version]:
    keys = ExternalSort(["key"], budget, str(sorts))
    for chunk in delete_record_chunks(block, _DELETE_CHUNK):
        keys.add(pa.table({"key": pa.array([d.record_key for d in chunk], pa.string())}))
    for table in keys.sorted_tables():
        for key in table.column("key").to_pylist():
            yield key, source, None
