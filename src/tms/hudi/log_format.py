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

import datetime as dt
import decimal
import enum
import io
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fastavro

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


class LogFormatError(ValueError):
    """Raised when bytes cannot be encoded or decoded as Hudi log blocks."""


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
# Delete record list schema (hudi-common/src/main/avro/HoodieDeleteRecordList.avsc, 0.14+)
# --------------------------------------------------------------------------------------------

_MODEL_NS = "org.apache.hudi.avro.model"


def _wrapper(name: str, value_type: Any) -> dict[str, Any]:
    return {
        "namespace": _MODEL_NS,
        "type": "record",
        "name": name,
        "fields": [{"name": "value", "type": value_type}],
    }


_DECIMAL_WRAPPER_SCALE = 15
_DECIMAL_WRAPPER_PRECISION = 30

#: Union branches of ``orderingVal`` in Hudi's order; the position is the on-disk union index.
_ORDERING_WRAPPERS: tuple[dict[str, Any], ...] = (
    _wrapper("BooleanWrapper", "boolean"),
    _wrapper("IntWrapper", "int"),
    _wrapper("LongWrapper", "long"),
    _wrapper("FloatWrapper", "float"),
    _wrapper("DoubleWrapper", "double"),
    _wrapper("BytesWrapper", "bytes"),
    _wrapper("StringWrapper", "string"),
    _wrapper("DateWrapper", "int"),
    _wrapper(
        "DecimalWrapper",
        {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": _DECIMAL_WRAPPER_PRECISION,
            "scale": _DECIMAL_WRAPPER_SCALE,
        },
    ),
    _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    _wrapper("TimestampMicrosWrapper", "long"),
)

DELETE_RECORD_LIST_SCHEMA: dict[str, Any] = {
    "namespace": _MODEL_NS,
    "type": "record",
    "name": "HoodieDeleteRecordList",
    "fields": [
        {
            "name": "deleteRecordList",
            "type": {
                "type": "array",
                "items": {
                    "name": "HoodieDeleteRecord",
                    "type": "record",
                    "fields": [
                        {"name": "recordKey", "type": ["null", "string"], "default": None},
                        {"name": "partitionPath", "type": ["null", "string"], "default": None},
                        {
                            "name": "orderingVal",
                            "type": ["null", *_ORDERING_WRAPPERS],
                            "default": None,
                        },
                    ],
                },
            },
        }
    ],
}

_PARSED_DELETE_SCHEMA = fastavro.parse_schema(DELETE_RECORD_LIST_SCHEMA)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE = dt.date(1970, 1, 1)


def _wrapper_name(short: str) -> str:
    return f"{_MODEL_NS}.{short}"


def _avro_kind(avro_type: Any) -> str | None:
    """The primitive or logical type name of a (possibly nullable) field type."""
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        return _avro_kind(branches[0]) if len(branches) == 1 else None
    if isinstance(avro_type, dict):
        logical = avro_type.get("logicalType")
        if isinstance(logical, str):
            return logical
        return _avro_kind(avro_type.get("type"))
    return avro_type if isinstance(avro_type, str) else None


def _micros_since_epoch(value: dt.datetime) -> int:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _wrap_ordering_value(value: object, kind: str | None) -> tuple[str, dict[str, object]]:
    """Wrap ``value`` the way Java's ``HoodieAvroUtils.wrapValueIntoAvro`` does.

    Python has one int and one float type, so ``kind`` (the Avro type of the ordering field)
    picks Int vs Long and Float vs Double; Hudi compares ordering values of the same class.
    """
    if value is None:
        # Java's DeleteRecord default: Integer 0, which every Hudi reader (0.14 Java, hudi-rs)
        # treats as "no ordering value" -- a null here would NPE Java 0.14's merger.
        return _wrapper_name("IntWrapper"), {"value": 0}
    if isinstance(value, bool):
        return _wrapper_name("BooleanWrapper"), {"value": value}
    if isinstance(value, int):
        short = {"int": "IntWrapper", "date": "DateWrapper"}.get(kind or "", "LongWrapper")
        return _wrapper_name(short), {"value": value}
    if isinstance(value, float):
        short = "FloatWrapper" if kind == "float" else "DoubleWrapper"
        return _wrapper_name(short), {"value": value}
    if isinstance(value, str):
        return _wrapper_name("StringWrapper"), {"value": value}
    if isinstance(value, bytes | bytearray | memoryview):
        return _wrapper_name("BytesWrapper"), {"value": bytes(value)}
    if isinstance(value, dt.datetime):
        return _wrapper_name("TimestampMicrosWrapper"), {"value": _micros_since_epoch(value)}
    if isinstance(value, dt.date):
        days = (value - _EPOCH_DATE).days
        return _wrapper_name("DateWrapper"), {"value": days}
    if isinstance(value, decimal.Decimal):
        scaled = value.quantize(decimal.Decimal(1).scaleb(-_DECIMAL_WRAPPER_SCALE))
        return _wrapper_name("DecimalWrapper"), {"value": scaled}
    raise LogFormatError(f"unsupported ordering value type {type(value).__name__}")


def _unwrap_ordering_value(wrapped: object) -> object | None:
    """Inverse of ``_wrap_ordering_value`` (decoded with record names).

    Null and Int 0 both mean "no ordering value" to Hudi, so both come back as None.
    """
    if wrapped is None:
        return None
    if not (isinstance(wrapped, tuple) and len(wrapped) == 2):
        raise LogFormatError(f"unexpected ordering value encoding {wrapped!r}")
    name, record = wrapped
    value: object = record["value"]
    short = str(name).rsplit(".", 1)[-1]
    if short == "IntWrapper" and value == 0:
        return None  # Hudi's "no ordering value" sentinel
    if short == "DateWrapper" and isinstance(value, int):
        return _EPOCH_DATE + dt.timedelta(days=value)
    if short == "TimestampMicrosWrapper" and isinstance(value, int):
        return _EPOCH + dt.timedelta(microseconds=value)
    return value


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
            return _avro_kind(fld.get("type"))
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
        wrapped = _wrap_ordering_value(d.ordering_value, kind)
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
    fastavro.schemaless_writer(buf, _PARSED_DELETE_SCHEMA, {"deleteRecordList": items})
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
        io.BytesIO(datum), _PARSED_DELETE_SCHEMA, None, return_record_name=True
    )
    if not isinstance(decoded, dict):
        raise LogFormatError("delete block datum is not a record")
    out: list[DeleteRecord] = []
    for item in decoded["deleteRecordList"]:
        out.append(
            DeleteRecord(
                record_key=item["recordKey"],
                partition_path=item["partitionPath"],
                ordering_value=_unwrap_ordering_value(item["orderingVal"]),
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
