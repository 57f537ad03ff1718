"""Merging a file slice within a memory budget: what a compaction task holds at once.

Hudi's merge handle streams the base file and keeps the log records in a map that spills to
local disk (`ExternalSpillableMap`). Here a slice whose records fit the budget is merged in
memory (`merge_slice_records`); a larger one is merged through the task's local disk:

- the log files are read a block at a time (a block's records decoded a chunk at a time)
  and their records and deletes partitioned by a hash of the record key into buckets;
- the base file is then read a batch of rows at a time: a row whose key no log record or
  delete names is carried to the new file as it is (`_KeyFilter`, a bit array of the logs'
  keys' hashes, says so; one that may answer yes for an unnamed key, never no for a named
  one), and the others go to their key's bucket;
- each bucket, which holds every version of its keys, is merged on its own: the merge
  semantics are those of `merge_versions`, key by key.

As in Hudi's merge handle, the rows no log record touches (most of a compacted slice) are
neither spilled nor sorted. When the logs name more keys than the budget holds hashes for,
their filter is a bit array of a fixed share of the budget instead (`FILTER_SHARE`): more of
the base rows of unnamed keys are spilled and merged alone as the keys grow, none is carried
wrongly. A bucket still larger than the budget is split again with
another hash seed; the versions of one key larger than the budget stop the task with
`TaskMemoryExceeded`.

Files of a remote table are read through local copies (one GET each, streamed to disk), so
no file is ever held whole in memory; files on a local file system are read in place.
"""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tms.hudi.files.data import block_records
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.local_copies import LocalCopies
from tms.hudi.files.log_block import BlockType, LogBlock
from tms.hudi.files.log_reader import (
    avro_record_chunks,
    delete_record_chunks,
    iter_log_file,
    parquet_record_chunks,
)
from tms.hudi.files.merge import DeleteVersion, Ordering, merge_versions
from tms.hudi.files.reader import (
    committed_blocks,
    conform_table,
    merge_order,
    merge_slice_records,
)
from tms.hudi.memory import TaskMemoryExceeded, read_spilled
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.record_keys import KeyGeneration
from tms.hudi.storage import Storage

__all__ = ["MergedPart", "SliceMerge", "merge_file_slice"]

EXPANSION = 10
"""Bytes in memory per byte on storage that merging a slice in memory takes (Parquet and
Avro decoded into Arrow, then the merge's sort and copy; measured 5.5x for the base file
alone): a slice whose files are larger than budget / EXPANSION is merged bucket by bucket."""
BUCKET_SHARE = 4
"""A bucket is merged in memory when its rows take at most budget / BUCKET_SHARE (the merge
makes about two more copies of them)."""
MAX_FANOUT = 256
DELETE_BYTES = 256
"""Bytes in memory a decoded delete record is counted at (a key, a partition path and an
ordering value as Python objects)."""
HASH_BYTES = 8
"""Bytes in memory per hash of the logs' keys kept while they are spilled (a uint64)."""
FILTER_SHARE = 8
"""The key filter of logs that name more keys than the budget keeps hashes of takes at most
budget / FILTER_SHARE (a bit array of a power of two bits, whatever the keys' number)."""
MAX_SPLITS = 4
"""Times a bucket over its share is split again, each with another seed, before its keys are
taken to be too few to split (one key's versions over the budget)."""
_POSITION = "_tms_position"
"""The spilled rows' write position (0: the base file, n: the n-th committed log block)."""


@dataclass(frozen=True)
class MergedPart:
    """Merged records of some of the slice's keys."""

    rows: pa.Table
    base_keys: pa.ChunkedArray | pa.Array | None
    """The record keys of the base file's rows among these keys (None: no base file)."""
    carried: bool = False
    """Every row is a base file row that no log record or delete names, carried as it is:
    nothing was updated, inserted or deleted among these keys."""


@dataclass
class SliceMerge:
    """A slice's merged records, part by part, and the counts known before the first part."""

    parts: Iterator[MergedPart]
    log_records: int
    spilled: bool
    """The slice was merged bucket by bucket from local disk."""
    buckets: int = 0


def merge_file_slice(
    storage: Storage,
    file_slice: FileSlice,
    ordering: Ordering,
    is_committed: Callable[[str], bool],
    *,
    budget: int,
    workdir: str,
    schema: pa.Schema | None = None,
    keys: KeyGeneration | None = None,
) -> SliceMerge:
    """The merged records of a slice (as `read_file_slice`), within `budget` bytes of
    records in memory; `workdir` is an empty local folder the caller removes afterwards."""
    files = LocalCopies(storage, workdir)
    base_path = files.local(file_slice.base_file.path) if file_slice.base_file else None
    log_paths = [files.local(log.path) for log in file_slice.log_files]
    on_disk = (os.path.getsize(base_path) if base_path else 0) + sum(
        os.path.getsize(p) for p in log_paths
    )
    if on_disk * EXPANSION <= budget:
        base = pq.read_table(base_path) if base_path else None
        blocks = committed_blocks([_read_blocks(p) for p in log_paths], is_committed)
        merged, log_records = merge_slice_records(base, blocks, ordering, schema, keys)
        base_keys = None
        if base is not None:
            base_keys = (keys.with_record_keys(base) if keys else base).column(RECORD_KEY)
        return SliceMerge(iter([MergedPart(merged, base_keys)]), log_records, spilled=False)
    fanout = min(MAX_FANOUT, max(2, math.ceil(on_disk * EXPANSION / (budget / BUCKET_SHARE))))
    spill = _Spill(Path(workdir) / "buckets", fanout, seed=0)
    if schema is None and base_path is not None:
        schema = pq.read_schema(base_path)
    # a slice without a base file has no rows to carry: its logs' keys are not kept
    max_hashes = int(budget / BUCKET_SHARE / HASH_BYTES) if base_path is not None else 0
    log_records, named_keys = spill.fill_logs(
        log_paths, is_committed, schema, keys, budget, max_hashes
    )
    held = named_keys.bits.nbytes if named_keys is not None else 0
    merger = _Merger(ordering, budget - held)  # the filter is held until the last part
    parts = _spilled_parts(spill, base_path, schema, keys, named_keys, merger, budget)
    return SliceMerge(parts, log_records, spilled=True, buckets=fanout)


def _spilled_parts(
    spill: _Spill,
    base_path: str | None,
    schema: pa.Schema | None,
    keys: KeyGeneration | None,
    named_keys: _KeyFilter | None,
    merger: _Merger,
    budget: int,
) -> Iterator[MergedPart]:
    """The base file's carried rows a batch at a time (its other rows spilled meanwhile),
    then the buckets merged."""
    if base_path is not None:
        for carried in spill.fill_base(base_path, schema, keys, named_keys, budget):
            yield MergedPart(carried, carried.column(RECORD_KEY), carried=True)
    spill.close()
    yield from merger.parts(spill)


def _read_blocks(path: str) -> list[LogBlock]:
    with open(path, "rb") as handle:
        return list(iter_log_file(handle))


# Spilling --------------------------------------------------------------------------------


def _key_hashes(record_keys: pa.ChunkedArray | pa.Array, seed: int) -> np.ndarray:
    """A 64-bit hash of each record key (with `seed`)."""
    hashed: np.ndarray = pl.Series(values=record_keys).hash(seed=seed).to_numpy()
    return hashed


def _buckets(hashes: np.ndarray, fanout: int) -> np.ndarray:
    """The bucket of each key: its hash modulo `fanout`."""
    return (hashes % np.uint64(fanout)).astype(np.int64)


@dataclass
class _Bucket:
    """One bucket's files: base rows, log rows (Arrow IPC streams) and deletes (pickles)."""

    folder: Path
    base_bytes: int = 0
    log_bytes: int = 0
    deletes: int = 0
    writers: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.base_bytes + self.log_bytes + self.deletes * DELETE_BYTES

    def path(self, kind: str) -> Path:
        return self.folder / kind

    def append(self, kind: str, rows: pa.Table) -> None:
        writer = self.writers.get(kind)
        if writer is None:
            writer = pa.ipc.new_stream(str(self.path(kind)), rows.schema)
            self.writers[kind] = writer
        writer.write_table(rows)
        if kind == "base":
            self.base_bytes += rows.nbytes
        else:
            self.log_bytes += rows.nbytes

    def append_deletes(self, deletes: list[DeleteVersion]) -> None:
        with open(self.path("deletes"), "ab") as out:
            pickle.dump(deletes, out, protocol=pickle.HIGHEST_PROTOCOL)
        self.deletes += len(deletes)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers.clear()

    def read(self, kind: str) -> pa.Table | None:
        if not self.path(kind).exists():
            return None
        with read_spilled(self.path(kind)) as reader:
            return reader.read_all()

    def batches(self, kind: str) -> Iterator[pa.RecordBatch]:
        if not self.path(kind).exists():
            return
        with read_spilled(self.path(kind)) as reader:
            yield from reader

    def read_deletes(self) -> Iterator[list[DeleteVersion]]:
        if not self.path("deletes").exists():
            return
        with open(self.path("deletes"), "rb") as source:
            while True:
                try:
                    yield pickle.load(source)  # the task's own spill file, never storage
                except EOFError:
                    return

    def remove(self) -> None:
        for kind in ("base", "log", "deletes"):
            self.path(kind).unlink(missing_ok=True)


class _Spill:
    """Rows and deletes partitioned into buckets on local disk by a hash of the key."""

    def __init__(self, folder: Path, fanout: int, seed: int) -> None:
        self.seed = seed
        self.fanout = fanout
        self.buckets: list[_Bucket] = []
        for index in range(fanout):
            bucket_folder = folder / str(index)
            bucket_folder.mkdir(parents=True)
            self.buckets.append(_Bucket(bucket_folder))

    def fill_logs(
        self,
        log_paths: Sequence[str],
        is_committed: Callable[[str], bool],
        schema: pa.Schema | None,
        keys: KeyGeneration | None,
        budget: int,
        max_hashes: int,
    ) -> tuple[int, _KeyFilter | None]:
        """Spill each committed log block's records and deletes; the log records read, and
        their keys as a `_KeyFilter`: sized to their number while it is at most `max_hashes`,
        else of `budget / FILTER_SHARE` bytes (None when `max_hashes` is 0: no base file)."""
        named = _LogKeys(max_hashes, budget // FILTER_SHARE)
        keep = named.keep
        positions = _merge_positions(log_paths, is_committed)
        ordinal = -1
        chunk_bytes = max(16 * 1024, int(budget / BUCKET_SHARE / EXPANSION))
        chunk_deletes = max(64, chunk_bytes // DELETE_BYTES)
        for path in log_paths:
            with open(path, "rb") as handle:
                for block in iter_log_file(handle, raw=True):
                    ordinal += 1
                    position = positions.get(ordinal)
                    if position is None:
                        continue
                    if block.block_type is BlockType.DELETE:
                        for deletes in delete_record_chunks(block, chunk_deletes):
                            keep(
                                self.add_deletes(
                                    [
                                        DeleteVersion(d.record_key, d.ordering_value, position)
                                        for d in deletes
                                    ]
                                )
                            )
                        continue
                    for chunk in _block_chunks(block, chunk_bytes):
                        records = block_records(chunk, schema)
                        schema = schema or records.schema
                        keep(self._add("log", records, position, schema, keys))
        return named.count, named.key_filter()

    def fill_base(
        self,
        base_path: str,
        schema: pa.Schema | None,
        keys: KeyGeneration | None,
        named_keys: _KeyFilter | None,
        budget: int,
    ) -> Iterator[pa.Table]:
        """The base file's rows a batch at a time: those of keys `named_keys` names spilled
        (all of them without it), the others yielded as they are."""
        source = pq.ParquetFile(base_path, buffer_size=1 << 20, pre_buffer=False)
        rows_total = max(1, source.metadata.num_rows)
        decoded = sum(
            source.metadata.row_group(i).total_byte_size
            for i in range(source.metadata.num_row_groups)
        )
        batch_rows = max(1024, int(budget / BUCKET_SHARE / 4 / max(1.0, decoded / rows_total)))
        for batch in source.iter_batches(batch_size=batch_rows):
            rows = self._prepared(pa.Table.from_batches([batch]), schema, keys)
            hashes = _key_hashes(rows.column(RECORD_KEY), self.seed)
            if named_keys is None:
                named = np.ones(len(hashes), dtype=bool)
            else:
                named = named_keys.may_contain(hashes)
            if named.any():
                spilled = rows.filter(pa.array(named))
                self._spill_rows("base", _with_position(spilled, 0), hashes[named])
            if not named.all():
                yield rows.filter(pa.array(~named))

    def _add(
        self,
        kind: str,
        rows: pa.Table,
        position: int,
        schema: pa.Schema | None,
        keys: KeyGeneration | None,
    ) -> np.ndarray:
        """Rows of one write position spilled; their keys' hashes."""
        rows = _with_position(self._prepared(rows, schema, keys), position)
        hashes = _key_hashes(rows.column(RECORD_KEY), self.seed)
        self._spill_rows(kind, rows, hashes)
        return hashes

    @staticmethod
    def _prepared(rows: pa.Table, schema: pa.Schema | None, keys: KeyGeneration | None) -> pa.Table:
        """Rows in the table's schema, with their record keys."""
        if schema is not None:
            rows = conform_table(rows, schema)
        if keys is not None:
            rows = keys.with_record_keys(rows)
        return rows

    def add_rows(self, kind: str, rows: pa.Table) -> None:
        """Rows that carry their write position, each into its key's bucket (in order)."""
        self._spill_rows(kind, rows, _key_hashes(rows.column(RECORD_KEY), self.seed))

    def _spill_rows(self, kind: str, rows: pa.Table, hashes: np.ndarray) -> None:
        if rows.num_rows == 0:
            return
        buckets = _buckets(hashes, self.fanout)
        order = np.argsort(buckets, kind="stable")
        counts = np.bincount(buckets, minlength=self.fanout)
        ordered = rows.take(pa.array(order))
        start = 0
        for index, count in enumerate(counts.tolist()):
            if count:
                self.buckets[index].append(kind, ordered.slice(start, count))
                start += count

    def add_deletes(self, deletes: list[DeleteVersion]) -> np.ndarray:
        """Deletes spilled, each into its key's bucket; their keys' hashes."""
        keys = pa.array([d.record_key for d in deletes], pa.string())
        hashes = _key_hashes(keys, self.seed)
        by_bucket: dict[int, list[DeleteVersion]] = {}
        for delete, bucket in zip(deletes, _buckets(hashes, self.fanout).tolist(), strict=True):
            by_bucket.setdefault(bucket, []).append(delete)
        for bucket, found in by_bucket.items():
            self.buckets[bucket].append_deletes(found)
        return hashes

    def close(self) -> None:
        for bucket in self.buckets:
            bucket.close()


class _LogKeys:
    """The logs' keys as they are spilled: their hashes while there are at most `max_hashes`
    (none kept when it is 0), then only their bits in a filter of `max_filter_bytes`."""

    def __init__(self, max_hashes: int, max_filter_bytes: int) -> None:
        self.max_hashes = max_hashes
        self.max_filter_bytes = max_filter_bytes
        self.count = 0
        self._kept: list[np.ndarray] = []
        self._saturated: _KeyFilter | None = None

    def keep(self, hashes: np.ndarray) -> None:
        self.count += len(hashes)
        if self.max_hashes == 0:
            return
        if self._saturated is not None:
            self._saturated.add(hashes)
            return
        self._kept.append(hashes)
        if self.count > self.max_hashes:  # too many to keep: their bits only, from now on
            self._saturated = _KeyFilter.within(self.max_filter_bytes)
            for part in self._kept:
                self._saturated.add(part)
            self._kept.clear()

    def key_filter(self) -> _KeyFilter | None:
        if self.max_hashes == 0:
            return None
        return self._saturated or _KeyFilter.sized(self._kept)


class _KeyFilter:
    """Whether a key may be among the logs' keys, from their hashes: a bit array of a power
    of two bits, the bit of each key's hash set. A key among them always answers yes; a few
    of the others do too (3 to 6 % at 16 to 32 bits a key), and their base rows are spilled
    and merged with no other version, which leaves them as they are."""

    def __init__(self, slots: int) -> None:
        self.mask = np.uint64(slots - 1)
        self.bits = np.zeros(slots // 8, dtype=np.uint8)

    @classmethod
    def sized(cls, hashes: Sequence[np.ndarray]) -> _KeyFilter:
        """The filter of `hashes`, 16 to 32 bits a key."""
        count = sum(len(h) for h in hashes)
        key_filter = cls(1 << max(6, (16 * count - 1).bit_length()))
        for part in hashes:
            key_filter.add(part)
        return key_filter

    @classmethod
    def within(cls, max_bytes: int) -> _KeyFilter:
        """An empty filter of the most bits `max_bytes` holds (a power of two, at least 64)."""
        return cls(1 << max(6, (max(8, max_bytes) * 8).bit_length() - 1))

    def add(self, hashes: np.ndarray) -> None:
        slot = hashes & self.mask
        np.bitwise_or.at(self.bits, slot >> np.uint64(3), self._bit(slot))

    @staticmethod
    def _bit(slot: np.ndarray) -> np.ndarray:
        return np.left_shift(np.uint8(1), (slot & np.uint64(7)).astype(np.uint8))

    def may_contain(self, hashes: np.ndarray) -> np.ndarray:
        slot = hashes & self.mask
        found: np.ndarray = (self.bits[slot >> np.uint64(3)] & self._bit(slot)) != 0
        return found


def _with_position(rows: pa.Table, position: int) -> pa.Table:
    """Rows with their write position (0: the base file, n: the n-th committed log block)."""
    return rows.append_column(_POSITION, pa.array(np.full(rows.num_rows, position, np.int32)))


def _block_chunks(block: LogBlock, chunk_bytes: int) -> Iterator[LogBlock]:
    """A data block as blocks of its records, decoded about `chunk_bytes` at a time (a
    data block read raw); a block of another kind as it is."""
    chunks: Iterator[Sequence[dict[str, object]]]
    if block.block_type is BlockType.AVRO_DATA and block.content_length:
        chunks = avro_record_chunks(block, chunk_bytes)
    elif block.block_type is BlockType.PARQUET_DATA and block.content_length:
        chunks = parquet_record_chunks(block, chunk_bytes)
    else:
        yield block
        return
    for records in chunks:
        yield LogBlock(block.block_type, block.header, records=records, footer=block.footer)


def _merge_positions(
    log_paths: Sequence[str], is_committed: Callable[[str], bool]
) -> dict[int, int]:
    """The merge position (from 1) of each block the merge applies, by its ordinal among the
    slice's blocks in write order (`merge_order`, from a pass over headers only)."""
    headers: list[LogBlock] = []
    for path in log_paths:
        with open(path, "rb") as handle:
            headers += iter_log_file(handle, decode=False)
    order = merge_order(headers, is_committed)
    return {ordinal: position for position, ordinal in enumerate(order, start=1)}


# Merging bucket by bucket ----------------------------------------------------------------


class _Merger:
    def __init__(self, ordering: Ordering, budget: int) -> None:
        self.ordering = ordering
        self.budget = budget

    def parts(self, spill: _Spill, splits: int = 0) -> Iterator[MergedPart]:
        """Buckets merged in groups of at most a bucket's share of the budget; a bucket over
        it split again first."""
        share = self.budget / BUCKET_SHARE
        group: list[_Bucket] = []
        group_size = 0
        for bucket in spill.buckets:
            if bucket.size == 0:
                continue  # no version of any key (the slice's base rows were carried)
            if bucket.size > share:
                if group:
                    yield from self._merge(group)
                    group, group_size = [], 0
                yield from self._split(bucket, spill, splits)
                continue
            if group and group_size + bucket.size > share:
                yield from self._merge(group)
                group, group_size = [], 0
            group.append(bucket)
            group_size += bucket.size
        if group:
            yield from self._merge(group)

    def _split(self, bucket: _Bucket, spill: _Spill, splits: int) -> Iterator[MergedPart]:
        if splits >= MAX_SPLITS:
            if bucket.size * 2 > self.budget:
                _refuse(bucket, self.budget)
            yield from self._merge([bucket])
            return
        fanout = min(MAX_FANOUT, max(2, math.ceil(bucket.size / (self.budget / BUCKET_SHARE))))
        again = _Spill(bucket.folder / "split", fanout, seed=spill.seed + 1 + splits)
        for kind in ("base", "log"):
            for batch in bucket.batches(kind):
                again.add_rows(kind, pa.Table.from_batches([batch]))
        for deletes in bucket.read_deletes():
            again.add_deletes(deletes)
        again.close()
        bucket.remove()
        yield from self.parts(again, splits + 1)

    def _merge(self, group: list[_Bucket]) -> Iterator[MergedPart]:
        """The group's merged rows, if it has rows (deletes alone, of keys the slice has no
        row of, merge to nothing)."""
        bases = [t for b in group if (t := b.read("base")) is not None]
        logs = [t for b in group if (t := b.read("log")) is not None]
        deletes = [d for b in group for found in b.read_deletes() for d in found]
        for bucket in group:
            bucket.remove()
        data = pa.concat_tables([*bases, *logs]) if bases or logs else None
        base_keys = pa.concat_tables(bases).column(RECORD_KEY) if bases else None
        if data is None:
            return
        positions = data.column(_POSITION).combine_chunks()
        if (
            len(positions) > 1
            and not pc.all(
                pc.greater_equal(positions.slice(1), positions.slice(0, len(positions) - 1))
            ).as_py()
        ):
            # a log compaction's blocks are applied where the blocks they stand for were,
            # before blocks read ahead of them: rows in merge order, as the merge takes them
            order = pc.sort_indices(positions)  # stable: rows of one position keep their order
            data, positions = data.take(order), positions.take(order)
        merged = merge_versions(data.drop_columns([_POSITION]), positions, deletes, self.ordering)
        yield MergedPart(merged, base_keys)


def _refuse(bucket: _Bucket, budget: int) -> None:
    """A bucket that splitting by key could not bring under the budget: few keys with many
    versions. Its keys are counted from disk (keys only) to name the largest."""
    counts: dict[str, int] = {}
    for kind in ("base", "log"):
        for batch in bucket.batches(kind):
            for key, count in pl.Series(values=batch.column(RECORD_KEY)).value_counts().rows():
                counts[key] = counts.get(key, 0) + count
    largest = max(counts, key=counts.__getitem__) if counts else None
    raise TaskMemoryExceeded(
        f"the versions of record key {largest!r} ({len(counts)} keys left unsplit)",
        bucket.size * 2,
        budget,
    )
