"""Read an HFile v3: the trailer, then the load-on-open section (root data index, meta index,
file info), then data blocks on demand, found through the (multi-level) block index.

The file is held in memory or read from a seekable binary file a block at a time (a metadata
table's base file may be a GB: a compaction reads it through a local copy)."""

from __future__ import annotations

import bisect
import io
import struct
from collections.abc import Iterator
from os import PathLike
from pathlib import Path
from typing import Protocol

from tms.hudi.errors import HFileError
from tms.hudi.hfile.block import Block, BlockHeader, read_block, read_header
from tms.hudi.hfile.file_info import decode_file_info
from tms.hudi.hfile.format import HEADER_SIZE, TRAILER_SIZE, BlockType, FileInfoKey
from tms.hudi.hfile.index import IndexEntry, decode_non_root, decode_root
from tms.hudi.hfile.keyvalue import key_row, read_vlong
from tms.hudi.hfile.trailer import Trailer, decode_trailer

_KV_LENGTHS = struct.Struct(">ii")


class SeekableFile(Protocol):
    """A binary file that seeks: an open file, a region of one, an object read by ranges."""

    def seek(self, offset: int, whence: int = ..., /) -> int: ...

    def read(self, size: int = ..., /) -> bytes | None: ...


class _FileBlocks:
    """The bytes of an HFile read from a seekable file, a block at a time."""

    def __init__(self, stream: SeekableFile) -> None:
        self._stream = stream
        self.size = stream.seek(0, io.SEEK_END)

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise HFileError(f"{length} bytes at offset {offset} run past the end of the file")
        self._stream.seek(offset)
        data = self._stream.read(length) or b""
        if len(data) != length:
            raise HFileError(f"the file ended within {length} bytes at offset {offset}")
        return data


class HFileReader:
    """An HFile in memory (bytes or a path read whole) or read from a seekable binary file a
    block at a time. Keys are KeyValue rows (Hudi's record keys); `entries()` and `get()` give
    them with their values, in file order."""

    def __init__(
        self, source: str | PathLike[str] | bytes | SeekableFile, verify_checksums: bool = True
    ) -> None:
        self._file: _FileBlocks | None = None
        if isinstance(source, bytes):
            self._data = source
        elif isinstance(source, (str, PathLike)):
            self._data = Path(source).read_bytes()
        else:
            self._file = _FileBlocks(source)
            self._data = b""
        self._verify = verify_checksums
        if self._file is None:
            self.trailer: Trailer = decode_trailer(self._data)
        else:
            if self._file.size < TRAILER_SIZE:
                raise HFileError(
                    f"{self._file.size} bytes is too short for an HFile v3 (trailer is 4096)"
                )
            self.trailer = decode_trailer(
                self._file.read(self._file.size - TRAILER_SIZE, TRAILER_SIZE)
            )
        self._compression = self.trailer.compression_codec
        root = self._block(self.trailer.load_on_open_data_offset, BlockType.ROOT_INDEX)
        self.data_index: list[IndexEntry] = decode_root(
            root.payload, self.trailer.data_index_count
        )[0]
        self._root_rows = [key_row(entry.key) for entry in self.data_index]
        meta_offset = root.offset + root.header.on_disk_size
        meta = self._block(meta_offset, BlockType.ROOT_INDEX)
        self._meta_index = decode_root(meta.payload, self.trailer.meta_index_count)[0]
        info = self._block(self.trailer.file_info_offset, BlockType.FILE_INFO)
        self.file_info: dict[bytes, bytes] = decode_file_info(info.payload)
        self._includes_tags = FileInfoKey.MAX_TAGS_LEN in self.file_info
        # HBase writes KEY_VALUE_VERSION 1 when each cell ends in an MVCC vlong; Hudi's own
        # writer always ends cells in one (zero) and may leave the key out, so only an
        # explicit 0 means "no MVCC".
        self._includes_mvcc = (
            self.file_info.get(FileInfoKey.KEY_VALUE_VERSION) != b"\x00\x00\x00\x00"
        )

    @property
    def num_entries(self) -> int:
        return self.trailer.entry_count

    @property
    def meta_block_names(self) -> list[bytes]:
        return [entry.key for entry in self._meta_index]

    def meta_block(self, name: bytes) -> bytes | None:
        """The payload of the meta block of that name (e.g. Hudi's `bloomFilter`)."""
        for entry in self._meta_index:
            if entry.key == name:
                return self._block(entry.offset, BlockType.META).payload
        return None

    def entries(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key and value, in file order (sorted by key)."""
        if self.trailer.entry_count == 0:
            return
        yield from self._scan(self.trailer.first_data_block_offset)

    def get(self, key: bytes | str) -> bytes | None:
        """The value of the first entry whose key is `key`, found through the block index."""
        values = self.get_all(key, limit=1)
        return values[0] if values else None

    def get_all(self, key: bytes | str, limit: int | None = None) -> list[bytes]:
        """Values of every entry with that key (keys need not be unique), in file order."""
        row = key.encode() if isinstance(key, str) else key
        if self.trailer.entry_count == 0 or not self.data_index:
            return []
        found: list[bytes] = []
        for entry_row, value in self._scan(self._seek_data_block(row)):
            if entry_row > row:
                break
            if entry_row == row:
                found.append(value)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def _seek_data_block(self, row: bytes) -> int:
        """Offset of the data block to start scanning at: at each index level, the last entry
        whose first row sorts before `row` (index keys may be shortened separators, so a block
        whose index row equals `row` may still have `row` in the block before)."""
        entries, rows = self.data_index, self._root_rows
        for level in range(self.trailer.num_data_index_levels, 0, -1):
            chosen = entries[max(bisect.bisect_left(rows, row) - 1, 0)]
            if level == 1:
                return chosen.offset
            expected = BlockType.LEAF_INDEX if level == 2 else BlockType.INTERMEDIATE_INDEX
            entries = decode_non_root(self._block(chosen.offset, expected).payload)
            if not entries:
                raise HFileError(f"empty index block at offset {chosen.offset}")
            rows = [key_row(entry.key) for entry in entries]
        raise HFileError("the data index has no levels")

    def _scan(self, offset: int) -> Iterator[tuple[bytes, bytes]]:
        """Entries from the data block at `offset` to the end of the data section, skipping
        the leaf index and meta blocks written between data blocks."""
        last = self.trailer.last_data_block_offset
        while offset <= last:
            header = self._header(offset)
            if header.magic == BlockType.DATA:
                yield from self._cells(self._block(offset, BlockType.DATA))
            offset += header.on_disk_size

    def _cells(self, block: Block) -> Iterator[tuple[bytes, bytes]]:
        payload = block.payload
        pos = 0
        end = len(payload)
        try:
            while pos < end:
                key_len, value_len = _KV_LENGTHS.unpack_from(payload, pos)
                pos += 8
                if key_len < 2 or value_len < 0 or pos + key_len + value_len > end:
                    raise HFileError(f"cell at offset {pos} of block {block.offset} is truncated")
                key = payload[pos : pos + key_len]
                pos += key_len
                value = payload[pos : pos + value_len]
                pos += value_len
                if self._includes_tags:
                    (tags_len,) = struct.unpack_from(">H", payload, pos)
                    pos += 2 + tags_len
                if self._includes_mvcc:
                    _, pos = read_vlong(payload, pos)
                yield key_row(key), value
        except struct.error as err:
            raise HFileError(f"data block at offset {block.offset} is truncated") from err

    def _header(self, offset: int) -> BlockHeader:
        if self._file is None:
            return read_header(self._data, offset)
        if offset < 0 or offset + HEADER_SIZE > self._file.size:
            raise HFileError(f"block header at offset {offset} runs past the end of the file")
        return read_header(self._file.read(offset, HEADER_SIZE), 0, self._file.size - offset)

    def _block(self, offset: int, expected: bytes) -> Block:
        if self._file is None:
            return read_block(self._data, offset, self._compression, expected, self._verify)
        raw = self._file.read(offset, self._header(offset).on_disk_size)
        try:
            block = read_block(raw, 0, self._compression, expected, self._verify)
        except HFileError as err:
            raise HFileError(f"{err} (the block at offset {offset} of the file)") from err
        return Block(offset, block.header, block.payload)
