"""Reading log blocks: a log file's bytes back into decoded ``LogBlock``s, in file order.

Torn or garbled blocks are returned as CORRUPTED blocks and reading resumes at the next MAGIC,
as Hudi's own reader does, so a crashed writer's partial tail does not hide earlier blocks.
The block layout is described in ``tms.hudi.files.log_block``.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from tms.hudi.avro.binary import encode_long
from tms.hudi.avro.delete_records import (
    DELETE_RECORD_LIST_SCHEMA,
    PARSED_DELETE_SCHEMA,
    unwrap_ordering_value,
)
from tms.hudi.errors import LogFormatError
from tms.hudi.files.avro_columns import ArrowRecords, decode_columns
from tms.hudi.files.log_block import (
    LOG_BLOCK_VERSION,
    LOG_FORMAT_VERSION,
    MAGIC,
    BlockType,
    ContentRegion,
    DeleteRecord,
    HeaderKey,
    LogBlock,
    parsed_block_array_schema,
    parsed_block_schema,
)

__all__ = [
    "avro_record_chunks",
    "decode_delete_content",
    "delete_record_chunks",
    "iter_log_file",
    "parquet_record_chunks",
    "read_log_blocks",
    "read_log_file",
]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Cursor:
    """Bounds-checked big-endian reads over a byte buffer."""

    def __init__(self, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        self.data = memoryview(data)
        self.pos = pos
        self.end = len(self.data) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise LogFormatError(f"truncated: need {n} bytes at offset {self.pos}")
        chunk = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return chunk

    def i32(self) -> int:
        value: int = _I32.unpack(self.take(4))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack(self.take(8))[0]
        return value


def _read_metadata(cur: _Cursor) -> dict[HeaderKey, str]:
    count = cur.i32()
    if count < 0 or count > 1024:
        raise LogFormatError(f"implausible metadata entry count {count}")
    out: dict[HeaderKey, str] = {}
    for _ in range(count):
        ordinal = cur.i32()
        try:
            key = HeaderKey(ordinal)
        except ValueError:
            raise LogFormatError(f"unknown header key ordinal {ordinal}") from None
        out[key] = cur.take(cur.i32()).decode("utf-8")
    return out


def _decode_avro_records(content: bytes, schema_json: str | None) -> Sequence[dict[str, object]]:
    if schema_json is None:
        raise LogFormatError("AVRO_DATA block has no SCHEMA header")
    cur = _Cursor(content)
    version = cur.i32()
    if version != LOG_BLOCK_VERSION:
        raise LogFormatError(f"unsupported Avro data block version {version}")
    count = cur.i32()
    bodies = [cur.take(cur.i32()) for _ in range(count)]
    return _decode_bodies(bodies, schema_json)


def avro_record_chunks(block: LogBlock, chunk_bytes: int) -> Iterator[Sequence[dict[str, object]]]:
    """The records of an AVRO_DATA block read with `raw` (`iter_log_file`), decoded about
    `chunk_bytes` of Avro at a time, read from the log file as they are decoded: a large
    block is decoded within a chunk's memory."""
    schema_json = block.header.get(HeaderKey.SCHEMA)
    if schema_json is None:
        raise LogFormatError("AVRO_DATA block has no SCHEMA header")
    content = block.content_stream()
    version = _stream_i32(content)
    if version != LOG_BLOCK_VERSION:
        raise LogFormatError(f"unsupported Avro data block version {version}")
    count = _stream_i32(content)
    if count < 0:
        raise LogFormatError(f"negative record count {count}")
    records_per_chunk = max(1, chunk_bytes * count // max(1, block.content_length))
    framed = _FramedBodies(content, max(1 << 16, chunk_bytes))
    for start in range(0, count, records_per_chunk):
        yield _decode_bodies(framed.take(min(records_per_chunk, count - start)), schema_json)


class _FramedBodies:
    """Length-prefixed record bodies read from a stream a buffer at a time (one read per
    `read_bytes`, not two per record): a block of many small records frames them in a loop
    over bytes already read."""

    def __init__(self, stream: BinaryIO, read_bytes: int) -> None:
        self.stream = stream
        self.read_bytes = read_bytes
        self.buffer = b""
        self.pos = 0

    def take(self, count: int) -> list[bytes]:
        """The next `count` bodies."""
        bodies: list[bytes] = []
        unpack = _I32.unpack_from
        buffer, pos = self.buffer, self.pos
        for _ in range(count):
            if len(buffer) - pos < 4:
                buffer, pos = self._fill(buffer, pos, 4)
            (size,) = unpack(buffer, pos)
            if size < 0:
                raise LogFormatError(f"negative length {size}")
            end = pos + 4 + size
            if end > len(buffer):
                buffer, pos = self._fill(buffer, pos, 4 + size)
                end = pos + 4 + size
            bodies.append(buffer[pos + 4 : end])
            pos = end
        self.buffer, self.pos = buffer, pos
        return bodies

    def _fill(self, buffer: bytes, pos: int, need: int) -> tuple[bytes, int]:
        """The unread rest of `buffer` with more bytes read after it: at least `need`."""
        pieces = [buffer[pos:]]
        have = len(pieces[0])
        while have < need:
            more = self.stream.read(max(self.read_bytes, need - have))
            if not more:
                raise LogFormatError(f"truncated: need {need} bytes, {have} left")
            pieces.append(more)
            have += len(more)
        return b"".join(pieces), 0


def _stream_take(stream: BinaryIO, n: int) -> bytes:
    if n < 0:
        raise LogFormatError(f"negative length {n}")
    data = stream.read(n)
    if len(data) != n:
        raise LogFormatError(f"truncated: need {n} bytes, {len(data)} left")
    return data


def _stream_i32(stream: BinaryIO) -> int:
    value: int = _I32.unpack(_stream_take(stream, 4))[0]
    return value


def _decode_bodies(bodies: list[bytes], schema_json: str) -> Sequence[dict[str, object]]:
    """Avro record bodies decoded: into Arrow columns in compiled code when the schema
    allows, else in one fastavro call, else one by one."""
    columns = decode_columns(bodies, schema_json)
    if columns is not None:
        return ArrowRecords(columns)
    records = _decode_as_one_array(bodies, schema_json)
    if records is not None:
        return records
    parsed = parsed_block_schema(schema_json)
    records = []
    for body in bodies:
        record = fastavro.schemaless_reader(io.BytesIO(body), parsed, None)
        if not isinstance(record, dict):
            raise LogFormatError("Avro data record is not a record")
        records.append(record)
    return records


def _decode_as_one_array(bodies: list[bytes], schema_json: str) -> list[dict[str, object]] | None:
    """The records of a data block decoded in one call: their bodies framed as one Avro array
    (a count, the bodies, a zero). None when that does not read back exactly the bodies (a
    record with bytes after its end): then each body is decoded on its own, as Hudi does."""
    if not bodies:
        return []
    framed = b"".join([encode_long(len(bodies)), *bodies, b"\x00"])
    stream = io.BytesIO(framed)
    try:
        decoded = fastavro.schemaless_reader(stream, parsed_block_array_schema(schema_json), None)
    except (ValueError, EOFError, IndexError, TypeError, KeyError, UnicodeDecodeError):
        return None
    if stream.tell() != len(framed) or not isinstance(decoded, list):
        return None
    if len(decoded) != len(bodies) or not all(isinstance(r, dict) for r in decoded):
        return None
    return decoded


def decode_delete_content(content: bytes) -> list[DeleteRecord]:
    """The delete records of a DELETE block's content (block version 3)."""
    decoded = fastavro.schemaless_reader(
        io.BytesIO(_delete_datum(content)), PARSED_DELETE_SCHEMA, None, return_record_name=True
    )
    if not isinstance(decoded, dict):
        raise LogFormatError("delete block datum is not a record")
    return [_delete_record(item) for item in decoded["deleteRecordList"]]


def _delete_datum(content: bytes) -> bytes:
    """The one Avro datum of a DELETE block's content (block version 3)."""
    cur = _Cursor(content)
    version = cur.i32()
    if version != LOG_BLOCK_VERSION:
        raise LogFormatError(f"unsupported delete block version {version} (only 3 is Avro)")
    return cur.take(cur.i32())


def _delete_record(item: dict[str, Any]) -> DeleteRecord:
    """One decoded `HoodieDeleteRecord`, its ordering value unwrapped."""
    return DeleteRecord(
        record_key=item["recordKey"],
        partition_path=item["partitionPath"],
        ordering_value=unwrap_ordering_value(item["orderingVal"]),
    )


_PARSED_DELETE_ITEM = fastavro.parse_schema(
    {
        **DELETE_RECORD_LIST_SCHEMA["fields"][0]["type"]["items"],
        "namespace": DELETE_RECORD_LIST_SCHEMA["namespace"],
    }
)


def delete_record_chunks(block: LogBlock, chunk_records: int) -> Iterator[list[DeleteRecord]]:
    """The delete records of a DELETE block read with `raw` (`iter_log_file`), at most
    `chunk_records` at a time: the block's one Avro datum (a record holding an array) is
    walked item by item, so a block of millions of deletes is read within a chunk's
    memory. The same records `decode_delete_content` returns, in the same order."""
    stream = block.content_stream()
    version = _stream_i32(stream)
    if version != LOG_BLOCK_VERSION:
        raise LogFormatError(f"unsupported delete block version {version} (only 3 is Avro)")
    _stream_i32(stream)  # the datum's length: it is walked to its end instead
    chunk: list[DeleteRecord] = []
    try:
        while count := _read_long(stream):
            if count < 0:  # a block of items that states its byte size next
                count = -count
                _read_long(stream)
            for _ in range(count):
                item = fastavro.schemaless_reader(
                    stream, _PARSED_DELETE_ITEM, None, return_record_name=True
                )
                if not isinstance(item, dict):
                    raise LogFormatError("delete block item is not a record")
                chunk.append(_delete_record(item))
                if len(chunk) >= chunk_records:
                    yield chunk
                    chunk = []
    except (EOFError, ValueError, IndexError) as exc:
        raise LogFormatError(f"delete block datum does not decode: {exc}") from exc
    if chunk:
        yield chunk


def _read_long(stream: BinaryIO) -> int:
    """One Avro long (zig-zag varint) from `stream`."""
    shift = value = 0
    while True:
        byte = stream.read(1)
        if not byte:
            raise LogFormatError("delete block datum ends inside a number")
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (value >> 1) ^ -(value & 1)
        shift += 7
        if shift > 63:
            raise LogFormatError("delete block datum holds a number longer than a long")


def _decode_parquet_records(content: bytes) -> ArrowRecords:
    """A PARQUET_DATA block's records, kept in Arrow columns as Parquet decodes them."""
    return ArrowRecords(pq.read_table(pa.BufferReader(content)))


def parquet_record_chunks(block: LogBlock, chunk_bytes: int) -> Iterator[ArrowRecords]:
    """The records of a PARQUET_DATA block read with `raw` (`iter_log_file`), decoded about
    `chunk_bytes` of Arrow at a time (Parquet's own sizes tell how many rows that is)."""
    source = pq.ParquetFile(
        block.content_stream() if block.region is not None else pa.BufferReader(block.content)
    )
    metadata = source.metadata
    decoded = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    rows = max(1, metadata.num_rows)
    batch_rows = max(1, int(chunk_bytes * rows / max(1, decoded)))
    for batch in source.iter_batches(batch_size=batch_rows):
        yield ArrowRecords(pa.Table.from_batches([batch]))


def _decode_block(
    block_type: BlockType,
    header: dict[HeaderKey, str],
    content: bytes,
    footer: dict[HeaderKey, str],
) -> LogBlock:
    if block_type is BlockType.AVRO_DATA:
        records = _decode_avro_records(content, header.get(HeaderKey.SCHEMA))
        return LogBlock(block_type, header, records=records, footer=footer)
    if block_type is BlockType.PARQUET_DATA:
        return LogBlock(block_type, header, records=_decode_parquet_records(content), footer=footer)
    if block_type is BlockType.DELETE:
        return LogBlock(block_type, header, deletes=decode_delete_content(content), footer=footer)
    if block_type is BlockType.COMMAND:
        return LogBlock(block_type, header, footer=footer)
    return LogBlock(block_type, header, footer=footer, content=content)


def _parse_block(
    data: memoryview, pos: int, decode: bool = True, raw: bool = False
) -> tuple[LogBlock, int]:
    """Parse the block whose MAGIC starts at ``pos``; returns it and the offset after it.
    Without `decode`, a data or delete block comes back with its header alone; with `raw`,
    a data or delete block's content is left undecoded in `content` (`avro_record_chunks`,
    `parquet_record_chunks`, `delete_record_chunks`)."""
    cur = _Cursor(data, pos + len(MAGIC))
    block_length = cur.i64()
    body_start = cur.pos
    end = body_start + block_length
    if block_length < 4 + 4 + 4 + 8 + 4 + 8 or end > len(data):
        raise LogFormatError(f"block at {pos} claims {block_length} bytes past the end")
    trailer = _I64.unpack(bytes(data[end - 8 : end]))[0]
    if trailer != block_length + len(MAGIC):
        raise LogFormatError(f"block at {pos}: trailer {trailer} != length {block_length} + 6")
    cur.end = end - 8
    version = cur.i32()
    if version != LOG_FORMAT_VERSION:
        raise LogFormatError(f"block at {pos}: unsupported log format version {version}")
    type_ordinal = cur.i32()
    try:
        block_type = BlockType(type_ordinal)
    except ValueError:
        raise LogFormatError(f"block at {pos}: unknown block type {type_ordinal}") from None
    header = _read_metadata(cur)
    content_length = cur.i64()
    if not decode:
        if content_length < 0 or cur.pos + content_length > cur.end:
            raise LogFormatError(f"truncated: need {content_length} bytes at offset {cur.pos}")
        cur.pos += content_length
        footer = _read_metadata(cur)
        if cur.pos != cur.end:
            raise LogFormatError(f"block at {pos}: {cur.end - cur.pos} stray bytes before trailer")
        return LogBlock(block_type, header, footer=footer), end
    content = cur.take(content_length)
    footer = _read_metadata(cur)
    if cur.pos != cur.end:
        raise LogFormatError(f"block at {pos}: {cur.end - cur.pos} stray bytes before trailer")
    if raw and block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE):
        return LogBlock(block_type, header, footer=footer, content=content), end
    return _decode_block(block_type, header, content, footer), end


def read_log_blocks(data: bytes) -> list[LogBlock]:
    """Every block of a log file's bytes, in file order.

    Unparseable spans (a torn last block, garbage between blocks) come back as CORRUPTED
    blocks holding the raw bytes; parsing resumes at the next MAGIC. Errors decoding the
    Avro payload of a well-framed block are raised, since they mean a schema bug, not a
    crash.
    """
    view = memoryview(data)
    blocks: list[LogBlock] = []
    pos = 0
    while pos < len(view):
        if bytes(view[pos : pos + len(MAGIC)]) == MAGIC:
            try:
                block, pos = _parse_block(view, pos)
            except LogFormatError:
                pass
            else:
                blocks.append(block)
                continue
        nxt = data.find(MAGIC, pos + 1)
        end = len(data) if nxt < 0 else nxt
        blocks.append(LogBlock(BlockType.CORRUPTED, {}, content=bytes(view[pos:end])))
        pos = end
    return blocks


def read_log_file(stream: BinaryIO) -> list[LogBlock]:
    """``read_log_blocks`` over a binary file object (read whole: for small files)."""
    return read_log_blocks(stream.read())


_HEAD = len(MAGIC) + 8
_SCAN_CHUNK = 1 << 20


def iter_log_file(
    stream: BinaryIO, *, decode: bool = True, raw: bool = False
) -> Iterator[LogBlock]:
    """The blocks of a seekable log file, in file order, one block in memory at a time.

    What `read_log_blocks` returns, block by block: a block is read and decoded only when
    the caller asks for the next one, so a log file of any size is read within the size of
    its largest block. Without `decode`, blocks carry their header and footer alone, their
    content skipped on disk (a pass that only needs instants and commands); corrupted spans
    carry no bytes then. With `raw`, data and delete blocks come undecoded, their content left
    in the file (`ContentRegion`, valid until the next block is asked for), for
    `avro_record_chunks`, `parquet_record_chunks` and `delete_record_chunks`: a block of any
    size is read within a chunk's memory.
    """
    size = stream.seek(0, io.SEEK_END)
    pos = 0
    while pos < size:
        stream.seek(pos)
        head = stream.read(_HEAD)
        if head[: len(MAGIC)] == MAGIC and len(head) == _HEAD:
            length = _I64.unpack(head[len(MAGIC) :])[0]
            if 0 < length <= size - pos - _HEAD:
                if raw or not decode:
                    found = _block_left_in_file(stream, pos, length, keep_content=decode)
                    if found is not None:
                        yield found
                        pos += _HEAD + length
                        continue
                    stream.seek(pos + _HEAD)
                whole = head + stream.read(length)
                try:
                    block, end = _parse_block(memoryview(whole), 0, decode, raw)
                except LogFormatError:
                    pass
                else:
                    whole = b""  # the block's bytes go before the caller holds the block
                    yield block
                    pos += end
                    continue
        end = _next_magic(stream, pos + 1, size)
        content = b""
        if decode:
            stream.seek(pos)
            content = stream.read(end - pos)
        yield LogBlock(BlockType.CORRUPTED, {}, content=content)
        pos = end


_HEAD_GUESS = 64 * 1024
_LEFT_IN_FILE = (
    BlockType.AVRO_DATA,
    BlockType.PARQUET_DATA,
    BlockType.HFILE_DATA,
    BlockType.DELETE,
)


def _block_left_in_file(
    stream: BinaryIO, pos: int, length: int, *, keep_content: bool
) -> LogBlock | None:
    """A well-framed block at `pos` (its MAGIC) with its header and footer read and its
    content left in the file: with `keep_content`, a data or delete block whose content is
    then read from the file (`ContentRegion`); without, a block of any kind, its content
    skipped. None for another kind of block or one that does not parse, which the caller
    reads whole."""
    try:
        prefix_length = min(length, _HEAD_GUESS)
        while True:
            stream.seek(pos + _HEAD)
            prefix = stream.read(prefix_length)
            cur = _Cursor(prefix)
            try:
                version = cur.i32()
                type_ordinal = cur.i32()
                if version != LOG_FORMAT_VERSION or type_ordinal not in {
                    t.value for t in (_LEFT_IN_FILE if keep_content else BlockType)
                }:
                    return None
                header = _read_metadata(cur)
                content_length = cur.i64()
                break
            except LogFormatError:
                if prefix_length >= length:
                    return None
                prefix_length = min(length, prefix_length * 4)
        content_start = _HEAD + cur.pos
        end = _HEAD + length
        if content_length < 0 or content_start + content_length > end - 8:
            return None
        stream.seek(pos + content_start + content_length)
        rest = stream.read(end - content_start - content_length)
        cur = _Cursor(rest, 0, len(rest) - 8)
        footer = _read_metadata(cur)
        if cur.pos != cur.end or _I64.unpack(rest[-8:])[0] != length + len(MAGIC):
            return None
    except LogFormatError:
        return None
    if not keep_content:
        return LogBlock(BlockType(type_ordinal), header, footer=footer)
    region = ContentRegion(stream, pos + content_start, content_length)
    return LogBlock(BlockType(type_ordinal), header, footer=footer, region=region)


def _next_magic(stream: BinaryIO, start: int, size: int) -> int:
    """The offset of the next MAGIC at or after `start`, or `size` when there is none."""
    pos = start
    while pos < size:
        stream.seek(pos)
        chunk = stream.read(_SCAN_CHUNK + len(MAGIC) - 1)
        found = chunk.find(MAGIC)
        if found >= 0:
            return pos + found
        if len(chunk) < _SCAN_CHUNK:
            return size
        pos += _SCAN_CHUNK
    return size
