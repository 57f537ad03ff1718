"""Hudi's log file format (log format version 1): the files merge-on-read tables append to.

A log file is a sequence of blocks; each block is laid out exactly as Java Hudi's
``HoodieLogFormatWriter`` writes it, all integers big-endian::

    MAGIC "#HUDI#"
    int64  block length      (everything after this field, up to and including the trailer)
    int32  log format version (1)
    int32  block type        (BlockType ordinal)
    header                   (int32 count, then per entry: int32 key ordinal, int32 byte
                              length, UTF-8 value)
    int64  content length
    bytes  content
    footer                   (same layout as the header; Hudi writes it empty)
    int64  trailer            (block length + len(MAGIC): the reverse pointer that readers use
                              to detect torn blocks)

Content by block type (the content version is ``LOG_BLOCK_VERSION`` = 3, the version
Hudi 0.14+ writes and hudi-rs requires):

- AVRO_DATA: int32 version, int32 record count, then per record int32 length + the record in
  Avro binary encoding under the SCHEMA header.
- DELETE: int32 version, int32 length, then one Avro datum of ``HoodieDeleteRecordList`` whose
  ordering values are wrapped in Hudi's per-type wrapper records (HUDI-5760).
- COMMAND: empty; the header says which command (``COMMAND_BLOCK_TYPE`` "0" = rollback of
  the blocks written by ``TARGET_INSTANT_TIME``).
- PARQUET_DATA: a whole Parquet file (read support only).

Torn or garbled blocks are returned as CORRUPTED blocks and reading resumes at the next MAGIC,
as Hudi's own reader does, so a crashed writer's partial tail does not hide earlier blocks.
"""

from __future__ import annotations

import enum
import io
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fastavro

from tms.hudi.delete_records import (
    DELETE_RECORD_LIST_SCHEMA,
    PARSED_DELETE_SCHEMA,
    LogFormatError,
    avro_kind,
    unwrap_ordering_value,
    wrap_ordering_value,
)

__all__ = [
    "DELETE_RECORD_LIST_SCHEMA",
    "LOG_BLOCK_VERSION",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "BlockType",
    "CommandBlockType",
    "DeleteRecord",
    "HeaderKey",
    "LogBlock",
    "LogFormatError",
    "decode_delete_content",
    "encode_avro_data_block",
    "encode_delete_block",
    "encode_log_block",
    "encode_rollback_block",
    "read_log_blocks",
    "read_log_file",
]

MAGIC = b"#HUDI#"
#: File-level log format version written after the block length.
LOG_FORMAT_VERSION = 1
#: Content version of data and delete blocks (Hudi 0.14+; hudi-rs accepts only 3).
LOG_BLOCK_VERSION = 3

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class BlockType(enum.IntEnum):
    """Block type ordinals (Java ``HoodieLogBlockType``; serialized as the ordinal)."""

    COMMAND = 0
    DELETE = 1
    CORRUPTED = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    """Header/footer keys (Java ``HeaderMetadataType``; serialized as the ordinal)."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


class CommandBlockType(enum.IntEnum):
    """Value of the COMMAND_BLOCK_TYPE header (Java ``HoodieCommandBlockTypeEnum``)."""

    ROLLBACK_BLOCK = 0


@dataclass(frozen=True)
class DeleteRecord:
    """One key deleted by a delete block.

    ``ordering_value`` decides, per Hudi's event-time merging, whether the delete beats a
    record with the same key (it does when its value is >= the record's). ``None`` means
    "delete regardless of ordering"; it is written as Int 0, Hudi's own sentinel for that, so
    an Int ordering value of 0 also reads back as ``None``. Partition paths are carried
    but readers match deletes by record key within the file group.
    """

    record_key: str
    partition_path: str
    ordering_value: object | None = None


@dataclass(frozen=True)
class LogBlock:
    """One decoded block: its type, header, and the records or deletes it carries."""

    block_type: BlockType
    header: Mapping[HeaderKey, str]
    records: Sequence[dict[str, object]] = ()
    deletes: Sequence[DeleteRecord] = ()
    footer: Mapping[HeaderKey, str] = field(default_factory=dict)
    #: Raw content of blocks this module does not decode (HFile, CDC, corrupted).
    content: bytes = b""

    @property
    def instant_time(self) -> str:
        """The instant that wrote the block (readers drop blocks of uncommitted instants)."""
        try:
            return self.header[HeaderKey.INSTANT_TIME]
        except KeyError:
            raise LogFormatError(f"{self.block_type.name} block has no INSTANT_TIME") from None

    @property
    def target_instant_time(self) -> str | None:
        """For command blocks, the instant whose blocks the command applies to."""
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> dict[str, Any] | None:
        """The Avro writer schema from the SCHEMA header, parsed from JSON."""
        text = self.header.get(HeaderKey.SCHEMA)
        if text is None:
            return None
        parsed: dict[str, Any] = json.loads(text)
        return parsed

    @property
    def is_rollback(self) -> bool:
        """Whether this is a rollback command block."""
        return self.block_type is BlockType.COMMAND and self.header.get(
            HeaderKey.COMMAND_BLOCK_TYPE
        ) == str(int(CommandBlockType.ROLLBACK_BLOCK))


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def _metadata_bytes(metadata: Mapping[HeaderKey, str]) -> bytes:
    out = bytearray(_I32.pack(len(metadata)))
    for key in sorted(metadata, key=int):
        value = metadata[key].encode("utf-8")
        out += _I32.pack(int(key))
        out += _I32.pack(len(value))
        out += value
    return bytes(out)


def encode_log_block(
    block_type: BlockType,
    header: Mapping[HeaderKey, str],
    content: bytes,
    footer: Mapping[HeaderKey, str] | None = None,
) -> bytes:
    """Frame ``content`` as one complete block, ready to append to a log file."""
    header_bytes = _metadata_bytes(header)
    footer_bytes = _metadata_bytes(footer or {})
    # Everything after the length field, including the trailing reverse pointer.
    block_length = 4 + 4 + len(header_bytes) + 8 + len(content) + len(footer_bytes) + 8
    return b"".join(
        (
            MAGIC,
            _I64.pack(block_length),
            _I32.pack(LOG_FORMAT_VERSION),
            _I32.pack(int(block_type)),
            header_bytes,
            _I64.pack(len(content)),
            content,
            footer_bytes,
            _I64.pack(block_length + len(MAGIC)),
        )
    )


def _schema_json(schema: Mapping[str, Any]) -> str:
    # Java's Schema.toString() is compact JSON; readers only parse it, but keep it familiar.
    return json.dumps(schema, separators=(",", ":"))


_PARSED_CACHE: dict[str, Any] = {}


def _parsed(schema_json: str) -> Any:
    """Parse an Avro schema once per distinct JSON text (blocks of a file share one)."""
    parsed = _PARSED_CACHE.get(schema_json)
    if parsed is None:
        if len(_PARSED_CACHE) > 64:
            _PARSED_CACHE.clear()
        parsed = fastavro.parse_schema(json.loads(schema_json))
        _PARSED_CACHE[schema_json] = parsed
    return parsed


def encode_avro_data_block(
    instant_time: str, schema: dict[str, Any], records: Iterable[Mapping[str, object]]
) -> bytes:
    """An AVRO_DATA block of ``records`` written by ``instant_time`` under ``schema``.

    ``schema`` is the full record schema including the meta columns (see
    ``tms.hudi.avro_schema.avro_record_schema``); records must carry the meta columns too,
    since readers take the record key and ordering value from them.
    """
    schema_json = _schema_json(schema)
    parsed = _parsed(schema_json)
    bodies: list[bytes] = []
    buf = io.BytesIO()
    for record in records:
        buf.seek(0)
        buf.truncate()
        try:
            fastavro.schemaless_writer(buf, parsed, dict(record))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise LogFormatError(f"record does not fit the block schema: {exc}") from exc
        body = buf.getvalue()
        bodies.append(_I32.pack(len(body)) + body)
    content = b"".join(
        (_I32.pack(LOG_BLOCK_VERSION), _I32.pack(len(bodies)), *bodies),
    )
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema_json}
    return encode_log_block(BlockType.AVRO_DATA, header, content)


def _field_kind(schema: Mapping[str, Any], field_name: str | None) -> str | None:
    if field_name is None:
        return None
    for fld in schema.get("fields", ()):
        if fld.get("name") == field_name:
            return avro_kind(fld.get("type"))
    raise LogFormatError(f"ordering field {field_name!r} is not in the schema")


def encode_delete_block(
    instant_time: str,
    schema: dict[str, Any],
    deletes: Sequence[DeleteRecord],
    *,
    ordering_field: str | None = None,
) -> bytes:
    """DELETE block bytes removing ``deletes``, written by ``instant_time``.

    ``schema`` goes into the SCHEMA header as Hudi does. Pass ``ordering_field`` (the
    table's precombine field) so integer and floating ordering values get the wrapper of
    the field's own Avro type (Int vs Long, Float vs Double): Java Hudi lets a delete lose
    only to a record whose ordering value has the same class. Without it ints are written
    as longs and floats as doubles.

    hudi-rs (0.5) refuses a delete block whose ordering values use different wrapper types,
    and "no ordering value" is an Int 0; so deletes whose wrappers differ (typically some
    with and some without ordering values) are written as consecutive DELETE blocks of the
    same instant, one per wrapper type, in order of first appearance.
    """
    kind = _field_kind(schema, ordering_field)
    groups: dict[str, list[dict[str, object]]] = {}
    for d in deletes:
        wrapped = wrap_ordering_value(d.ordering_value, kind)
        groups.setdefault(wrapped[0], []).append(
            {"recordKey": d.record_key, "partitionPath": d.partition_path, "orderingVal": wrapped}
        )
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: _schema_json(schema)}
    blocks = [
        encode_log_block(BlockType.DELETE, header, _delete_content(items))
        for items in (groups.values() if groups else [[]])
    ]
    return b"".join(blocks)


def _delete_content(items: list[dict[str, object]]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, PARSED_DELETE_SCHEMA, {"deleteRecordList": items})
    datum = buf.getvalue()
    return _I32.pack(LOG_BLOCK_VERSION) + _I32.pack(len(datum)) + datum


def encode_rollback_block(instant_time: str, target_instant_time: str) -> bytes:
    """A COMMAND block, written by rollback ``instant_time``, voiding ``target_instant_time``.

    Readers drop every block whose INSTANT_TIME equals the target, in this file slice.
    """
    header = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.TARGET_INSTANT_TIME: target_instant_time,
        HeaderKey.COMMAND_BLOCK_TYPE: str(int(CommandBlockType.ROLLBACK_BLOCK)),
    }
    return encode_log_block(BlockType.COMMAND, header, b"")


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


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


def _decode_avro_records(content: bytes, schema_json: str | None) -> list[dict[str, object]]:
    if schema_json is None:
        raise LogFormatError("AVRO_DATA block has no SCHEMA header")
    cur = _Cursor(content)
    version = cur.i32()
    if version != LOG_BLOCK_VERSION:
        raise LogFormatError(f"unsupported Avro data block version {version}")
    parsed = _parsed(schema_json)
    count = cur.i32()
    records: list[dict[str, object]] = []
    for _ in range(count):
        body = cur.take(cur.i32())
        record = fastavro.schemaless_reader(io.BytesIO(body), parsed, None)
        if not isinstance(record, dict):
            raise LogFormatError("Avro data record is not a record")
        records.append(record)
    return records


def decode_delete_content(content: bytes) -> list[DeleteRecord]:
    """The delete records of a DELETE block's content (block version 3)."""
    cur = _Cursor(content)
    version = cur.i32()
    if version != LOG_BLOCK_VERSION:
        raise LogFormatError(f"unsupported delete block version {version} (only 3 is Avro)")
    datum = cur.take(cur.i32())
    decoded = fastavro.schemaless_reader(
        io.BytesIO(datum), PARSED_DELETE_SCHEMA, None, return_record_name=True
    )
    if not isinstance(decoded, dict):
        raise LogFormatError("delete block datum is not a record")
    out: list[DeleteRecord] = []
    for item in decoded["deleteRecordList"]:
        out.append(
            DeleteRecord(
                record_key=item["recordKey"],
                partition_path=item["partitionPath"],
                ordering_value=unwrap_ordering_value(item["orderingVal"]),
            )
        )
    return out


def _decode_parquet_records(content: bytes) -> list[dict[str, object]]:
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(content))
    return [dict(row) for row in table.to_pylist()]


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


def _parse_block(data: memoryview, pos: int) -> tuple[LogBlock, int]:
    """Parse the block whose MAGIC starts at ``pos``; returns it and the offset after it."""
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
    content = cur.take(cur.i64())
    footer = _read_metadata(cur)
    if cur.pos != cur.end:
        raise LogFormatError(f"block at {pos}: {cur.end - cur.pos} stray bytes before trailer")
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
    """``read_log_blocks`` over a binary file object (read whole; log files are small)."""
    return read_log_blocks(stream.read())
