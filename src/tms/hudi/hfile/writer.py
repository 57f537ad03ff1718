"""Write an HFile v3 laid out as HBase 2.4 writes the metadata table's files: data blocks of
cells, leaf index blocks inline once a leaf chunk outgrows the index block size, then meta
blocks, intermediate index levels, the root data index, the meta index, file info and the
trailer.

Written to a path, each block goes to the file as it is finished: the writer holds one data
block and the index entries (one per block), so a GB base file is written within a few MB."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.errors import HFileError
from tms.hudi.hfile.block import encode_block
from tms.hudi.hfile.file_info import encode_file_info
from tms.hudi.hfile.format import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_COMPARATOR,
    DEFAULT_INDEX_BLOCK_SIZE,
    HEADER_SIZE,
    LATEST_TIMESTAMP,
    MAX_INDEX_LEVELS,
    MIN_INDEX_NUM_ENTRIES,
    SUPPORTED_COMPRESSION,
    TRAILER_SIZE,
    TYPE_MAXIMUM,
    BlockType,
    Compression,
    FileInfoKey,
)
from tms.hudi.hfile.framing import KEY_EXTRA, frame_cells
from tms.hudi.hfile.index import (
    IndexEntry,
    encode_non_root,
    encode_root,
    non_root_size,
    root_size,
)
from tms.hudi.hfile.keyvalue import (
    LATEST_PUT_TAIL,
    MAX_ROW_LENGTH,
    encode_key,
    key_row,
    row_too_long,
    write_vlong,
)
from tms.hudi.hfile.trailer import Trailer, encode_trailer

_MVCC_ZERO = write_vlong(0)
_CELL_LENGTHS = struct.Struct(">ii")
_FRAMED_ROWS = 1 << 16
"""Rows framed per bulk step of `append_rows` (bounds its working buffers to a few MB)."""


def _separator_row(left: bytes, right: bytes) -> bytes:
    """The shortest row sorting after `left` and no later than `right` (HBase's
    `getMinimumMidpointArray`), used as a data block's index key."""
    common = 0
    limit = min(len(left), len(right))
    while common < limit and left[common] == right[common]:
        common += 1
    if common >= limit:
        return right[: common + 1]
    if left[common] < 0xFF and left[common] + 1 < right[common]:
        return left[:common] + bytes([left[common] + 1])
    return right[: common + 1]


def _index_key(previous_last: bytes | None, first: bytes) -> bytes:
    """A data block's index key: its first key for the first block, else a short fake key
    between the previous block's last key and this block's first (as HBase writes)."""
    if previous_last is None:
        return first
    left, right = key_row(previous_last), key_row(first)
    if left == right:
        return first
    return encode_key(_separator_row(left, right), LATEST_TIMESTAMP, TYPE_MAXIMUM)


class HFileWriter:
    """Writes sorted cells as one HFile: to `path` block by block (completed by `close()` or
    on leaving a `with` block), else in memory (`finish()` gives the bytes). Keys may repeat
    but never go backwards."""

    def __init__(
        self,
        path: str | PathLike[str] | None = None,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        compression: Compression = Compression.NONE,
        index_block_size: int = DEFAULT_INDEX_BLOCK_SIZE,
        file_info: Mapping[bytes, bytes] | None = None,
        comparator_class_name: str = DEFAULT_COMPARATOR,
    ) -> None:
        if compression not in SUPPORTED_COMPRESSION:
            raise HFileError(f"compression {compression.name} is not supported (NONE, GZ)")
        if block_size <= 0 or index_block_size <= 0:
            raise HFileError("block_size and index_block_size must be positive")
        self._path = None if path is None else Path(path)
        self._block_size = block_size
        self._index_block_size = index_block_size
        self._compression = compression
        self._comparator = comparator_class_name
        self._user_info: dict[bytes, bytes] = dict(file_info or {})
        self._meta_blocks: list[tuple[bytes, bytes]] = []
        self._file: BinaryIO | None = None if self._path is None else self._path.open("wb")
        self._out = bytearray()
        """The file's bytes in memory; with a path, only what is not yet written out."""
        self._written = 0
        """Bytes already written to the path."""
        self._prev_offsets: dict[bytes, int] = {}
        self._cells = bytearray()
        self._block_first_key: bytes | None = None
        self._last_key: bytes | None = None
        self._last_row: bytes | None = None
        self._prev_block_last_key: bytes | None = None
        self._leaf_chunk: list[IndexEntry] = []
        self._leaf_level: list[IndexEntry] = []
        self._leaf_level_blocks: list[int] = []
        self._first_data_offset = -1
        self._last_data_offset = -1
        self._entry_count = 0
        self._key_bytes = 0
        self._value_bytes = 0
        self._index_uncompressed = 0
        self._total_uncompressed = 0
        self._finished: bytes | None = None
        self._size: int | None = None

    def append(self, key: bytes | str, value: bytes) -> None:
        """Add a cell; `key` must not sort before the previous one."""
        self.append_cells([(key.encode() if isinstance(key, str) else key, value)])

    def append_cells(self, cells: Iterable[tuple[bytes, bytes]]) -> None:
        """Add cells (row, value) in order; no row may sort before the one before it. One loop
        over all of them, each cell framed inline (`encode_key` of a latest put): the metadata
        table writes up to millions at a time."""
        if self._size is not None:
            raise HFileError("the HFile is already finished")
        block_size, pack, tail, mvcc = (
            self._block_size,
            _CELL_LENGTHS.pack,
            LATEST_PUT_TAIL,
            _MVCC_ZERO,
        )
        key_extra = 2 + len(tail)
        out, last_row, last_key = self._cells, self._last_row, self._last_key
        starts_block = self._block_first_key is None
        count = row_bytes = value_bytes = 0
        try:
            for row, value in cells:
                if last_row is not None and row != last_row:
                    if row < last_row:
                        raise HFileError(
                            f"key {row!r} sorts before the previous key; keys must be sorted"
                        )
                    if len(out) >= block_size:
                        # HBase starts a block only between distinct keys: a key's cells stay
                        # together.
                        self._last_key = last_key
                        self._finish_data_block()
                        out, starts_block = self._cells, True
                length = len(row)
                if length > MAX_ROW_LENGTH:
                    raise row_too_long(row)
                full_key = length.to_bytes(2, "big") + row + tail
                out += pack(length + key_extra, len(value)) + full_key + value + mvcc
                if starts_block:
                    self._block_first_key, starts_block = full_key, False
                last_key, last_row = full_key, row
                count += 1
                row_bytes += length
                value_bytes += len(value)
        finally:  # what was added counts, even when a row out of order stops the rest
            self._last_key, self._last_row = last_key, last_row
            self._entry_count += count
            self._key_bytes += row_bytes + count * key_extra
            self._value_bytes += value_bytes

    def append_rows(
        self, rows: pa.Array, values: Sequence[bytes], value_of_row: np.ndarray
    ) -> None:
        """Add cells in bulk, the same bytes as `append_cells`: row `i` of `rows` (binary or
        UTF-8 strings, in order, no nulls) with value `values[value_of_row[i]]`. Arrow frames
        the cells and numpy finds the block boundaries; nothing is added if a row is too long
        or out of order."""
        if self._size is not None:
            raise HFileError("the HFile is already finished")
        count = len(rows)
        if count == 0:
            return
        rows = rows.cast(pa.binary())
        if rows.null_count:
            raise HFileError("rows must not be null")
        lengths = pc.binary_length(rows).to_numpy(zero_copy_only=False)
        too_long = np.flatnonzero(lengths > MAX_ROW_LENGTH)
        if too_long.size:
            raise row_too_long(rows[int(too_long[0])].as_py())
        distinct = np.ones(count, dtype=bool)
        if count > 1:
            later, earlier = rows[1:], rows[:-1]
            backwards = np.flatnonzero(pc.less(later, earlier).to_numpy(zero_copy_only=False))
            if backwards.size:
                row = rows[int(backwards[0]) + 1].as_py()
                raise HFileError(f"key {row!r} sorts before the previous key; keys must be sorted")
            distinct[1:] = pc.not_equal(later, earlier).to_numpy(zero_copy_only=False)
        first = rows[0].as_py()
        if self._last_row is not None:
            if first < self._last_row:
                raise HFileError(
                    f"key {first!r} sorts before the previous key; keys must be sorted"
                )
            distinct[0] = first != self._last_row
        value_lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        for start in range(0, count, _FRAMED_ROWS):
            stop = min(start + _FRAMED_ROWS, count)
            cells = frame_cells(rows.slice(start, stop - start), values, value_of_row[start:stop])
            self._append_framed(cells, distinct[start:stop])
        self._last_row = rows[count - 1].as_py()
        self._entry_count += count
        self._key_bytes += int(lengths.sum()) + count * KEY_EXTRA
        self._value_bytes += int(value_lengths[value_of_row].sum())

    def _append_framed(self, cells: pa.BinaryArray, distinct: np.ndarray) -> None:
        """Append framed cells, a data block finished before each distinct row that finds the
        block at or over the block size (as `append_cells` does, one cell at a time)."""
        _, offsets_buffer, data_buffer = cells.buffers()
        bounds = np.frombuffer(offsets_buffer, dtype=np.int32)[
            cells.offset : cells.offset + len(cells) + 1
        ].astype(np.int64)
        data = memoryview(data_buffer)
        cut_points = np.flatnonzero(distinct)

        def full_key(cell: int) -> bytes:
            at = int(bounds[cell]) + 8
            row_length = int.from_bytes(data[at : at + 2], "big")
            return bytes(data[at : at + row_length + KEY_EXTRA])

        count, at = len(cells), 0
        while at < count:
            need = self._block_size - len(self._cells) + bounds[at]
            earliest = max(int(np.searchsorted(bounds[:-1], need, side="left")), at)
            place = int(np.searchsorted(cut_points, earliest, side="left"))
            cut = int(cut_points[place]) if place < len(cut_points) else count
            if cut > at:
                if self._block_first_key is None:
                    self._block_first_key = full_key(at)
                self._cells += data[bounds[at] : bounds[cut]]
                self._last_key = full_key(cut - 1)
                at = cut
            if cut < count:
                self._finish_data_block()

    def add_file_info(self, key: bytes, value: bytes) -> None:
        self._user_info[key] = value

    def add_meta_block(self, name: bytes, payload: bytes) -> None:
        """A named meta block (Hudi writes its bloom filter as `bloomFilter`)."""
        self._meta_blocks.append((name, payload))

    @property
    def _offset(self) -> int:
        """Where the next block starts in the file."""
        return self._written + len(self._out)

    def finish(self) -> bytes:
        """Write the remaining sections; returns the file's bytes (an HFile in memory)."""
        if self._path is not None:
            raise HFileError(f"the HFile is written to {self._path}: close() it and read it there")
        if self._finished is None:
            self.close()
            self._finished = bytes(self._out)
        return self._finished

    def close(self) -> int:
        """Write the remaining sections (to `path` when given); returns the file's size."""
        if self._size is not None:
            return self._size
        try:
            self._write_sections()
        finally:
            if self._file is not None:
                self._file.close()
        return self._offset

    def _write_sections(self) -> None:
        self._finish_data_block()
        single_level = not self._leaf_level
        if single_level:
            root = self._leaf_chunk
        else:
            if self._leaf_chunk:
                self._write_leaf_block()
            root = self._leaf_level
        meta_index = [
            self._entry(name, self._write_block(BlockType.META, payload))
            for name, payload in self._meta_blocks
        ]
        levels = 1 if single_level else 2
        mid_key = b"" if single_level else self._mid_key(root, self._leaf_level_blocks)
        if not single_level:
            while (
                root_size(root) > self._index_block_size
                and len(root) > MIN_INDEX_NUM_ENTRIES
                and levels < MAX_INDEX_LEVELS
            ):
                root = self._write_intermediate_level(root)
                levels += 1
        load_on_open = self._offset
        root_payload = encode_root(root) + mid_key
        self._write_block(BlockType.ROOT_INDEX, root_payload, counted=False)
        self._index_uncompressed += len(root_payload)
        self._write_block(BlockType.ROOT_INDEX, encode_root(meta_index))
        file_info_offset = self._offset
        self._write_block(BlockType.FILE_INFO, encode_file_info(self._file_info()))
        trailer = Trailer(
            file_info_offset=file_info_offset,
            load_on_open_data_offset=load_on_open,
            uncompressed_data_index_size=self._index_uncompressed,
            total_uncompressed_bytes=self._total_uncompressed + TRAILER_SIZE,
            data_index_count=len(root),
            meta_index_count=len(meta_index),
            entry_count=self._entry_count,
            num_data_index_levels=levels,
            first_data_block_offset=self._first_data_offset,
            last_data_block_offset=self._last_data_offset,
            comparator_class_name=self._comparator,
            compression_codec=self._compression,
        )
        self._out += encode_trailer(trailer)
        self._flush()
        self._size = self._offset

    def __enter__(self) -> HFileWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        elif self._file is not None:
            self._file.close()

    def _file_info(self) -> dict[bytes, bytes]:
        count = self._entry_count
        info = dict(self._user_info)
        info[FileInfoKey.KEY_VALUE_VERSION] = struct.pack(">i", 1)
        info[FileInfoKey.MAX_MEMSTORE_TS] = struct.pack(">q", 0)
        info[FileInfoKey.AVG_KEY_LEN] = struct.pack(">i", self._key_bytes // count if count else 0)
        info[FileInfoKey.AVG_VALUE_LEN] = struct.pack(
            ">i", self._value_bytes // count if count else 0
        )
        info.setdefault(FileInfoKey.CREATE_TIME_TS, struct.pack(">q", 0))
        if self._last_key is not None:
            info[FileInfoKey.LAST_KEY] = self._last_key
        return dict(sorted(info.items()))

    def _write_block(self, magic: bytes, payload: bytes, counted: bool = True) -> tuple[int, int]:
        """Append a block; returns its offset and on-disk size (header included). HBase's
        trailer total of uncompressed bytes leaves out the root and intermediate data index
        blocks (`counted=False`)."""
        offset = self._offset
        encoded = encode_block(magic, payload, self._prev_offsets.get(magic, -1), self._compression)
        self._out += encoded
        self._flush()
        self._prev_offsets[magic] = offset
        if counted:
            self._total_uncompressed += HEADER_SIZE + len(payload)
        return offset, len(encoded)

    def _flush(self) -> None:
        """Hand the bytes made so far to the file (a path's writer keeps none of them)."""
        if self._file is not None and self._out:
            self._file.write(self._out)
            self._written += len(self._out)
            self._out = bytearray()

    @staticmethod
    def _entry(key: bytes, where: tuple[int, int]) -> IndexEntry:
        return IndexEntry(where[0], where[1], key)

    def _finish_data_block(self) -> None:
        if self._block_first_key is None:
            return
        where = self._write_block(BlockType.DATA, bytes(self._cells))
        if self._first_data_offset < 0:
            self._first_data_offset = where[0]
        self._last_data_offset = where[0]
        key = _index_key(self._prev_block_last_key, self._block_first_key)
        self._leaf_chunk.append(self._entry(key, where))
        self._prev_block_last_key = self._last_key
        self._cells = bytearray()
        self._block_first_key = None
        if non_root_size(self._leaf_chunk) >= self._index_block_size:
            self._write_leaf_block()

    def _write_leaf_block(self) -> None:
        payload = encode_non_root(self._leaf_chunk)
        where = self._write_block(BlockType.LEAF_INDEX, payload)
        self._index_uncompressed += len(payload)
        self._leaf_level.append(self._entry(self._leaf_chunk[0].key, where))
        self._leaf_level_blocks.append(len(self._leaf_chunk))
        self._leaf_chunk = []

    def _write_intermediate_level(self, level: list[IndexEntry]) -> list[IndexEntry]:
        parent: list[IndexEntry] = []
        chunk: list[IndexEntry] = []
        for entry in level:
            chunk.append(entry)
            if root_size(chunk) >= self._index_block_size:
                parent.append(self._write_intermediate_block(chunk))
                chunk = []
        if chunk:
            parent.append(self._write_intermediate_block(chunk))
        return parent

    def _write_intermediate_block(self, chunk: list[IndexEntry]) -> IndexEntry:
        payload = encode_non_root(chunk)
        where = self._write_block(BlockType.INTERMEDIATE_INDEX, payload, counted=False)
        self._index_uncompressed += len(payload)
        return self._entry(chunk[0].key, where)

    @staticmethod
    def _mid_key(leaves: list[IndexEntry], blocks_per_leaf: list[int]) -> bytes:
        """HBase's mid-key metadata after a multi-level root: the leaf block holding the middle
        data block's entry, and that entry's position within the leaf."""
        total = sum(blocks_per_leaf)
        middle = (total - 1) // 2
        before = 0
        for leaf, count in zip(leaves, blocks_per_leaf, strict=True):
            if middle < before + count:
                return struct.pack(">qii", leaf.offset, leaf.on_disk_size, middle - before)
            before += count
        return b""
