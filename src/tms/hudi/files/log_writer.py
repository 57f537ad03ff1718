"""Writing log blocks: the bytes our writers append to a merge-on-read table's log files.

Each function returns one or more complete blocks, framed as ``tms.hudi.files.log_block`` describes,
so callers append the bytes to a log file as they are. Data blocks carry their Avro schema in
the SCHEMA header; delete blocks follow Java Hudi's and hudi-rs's rules on ordering values.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import fastavro
import pyarrow as pa

from tms.hudi.avro.columnar_encoder import framed_records
from tms.hudi.avro.delete_records import PARSED_DELETE_SCHEMA, avro_kind, wrap_ordering_value
from tms.hudi.avro.schema import avro_datum_converter
from tms.hudi.errors import LogFormatError
from tms.hudi.files.log_block import (
    LOG_BLOCK_VERSION,
    LOG_FORMAT_VERSION,
    MAGIC,
    BlockType,
    CommandBlockType,
    DeleteRecord,
    HeaderKey,
    parsed_block_schema,
)

__all__ = [
    "encode_avro_data_block",
    "encode_delete_block",
    "encode_log_block",
    "encode_rollback_block",
    "log_block_frame",
]

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


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
    before, after = log_block_frame(block_type, header, len(content), footer)
    return before + content + after


def log_block_frame(
    block_type: BlockType,
    header: Mapping[HeaderKey, str],
    content_length: int,
    footer: Mapping[HeaderKey, str] | None = None,
) -> tuple[bytes, bytes]:
    """The bytes before and after a block's content of `content_length` bytes: a large
    content is copied between them from a local file, never held."""
    header_bytes = _metadata_bytes(header)
    footer_bytes = _metadata_bytes(footer or {})
    # Everything after the length field, including the trailing reverse pointer.
    block_length = 4 + 4 + len(header_bytes) + 8 + content_length + len(footer_bytes) + 8
    before = b"".join(
        (
            MAGIC,
            _I64.pack(block_length),
            _I32.pack(LOG_FORMAT_VERSION),
            _I32.pack(int(block_type)),
            header_bytes,
            _I64.pack(content_length),
        )
    )
    return before, footer_bytes + _I64.pack(block_length + len(MAGIC))


def _schema_json(schema: Mapping[str, Any]) -> str:
    # Java's Schema.toString() is compact JSON; readers only parse it, but keep it familiar.
    return json.dumps(schema, separators=(",", ":"))


def encode_avro_data_block(
    instant_time: str,
    schema: dict[str, Any],
    records: Iterable[Mapping[str, object]] | pa.Table,
    *,
    extra_header: Mapping[HeaderKey, str] | None = None,
) -> bytes:
    """An AVRO_DATA block of ``records`` written by ``instant_time`` under ``schema``.

    ``schema`` is the full record schema including the meta columns (see
    ``tms.hudi.avro.schema.avro_record_schema``); records must carry the meta columns too,
    since readers take the record key and ordering value from them. Records may be rows as
    Arrow gives them (maps as lists of key/value pairs), or a table: its columns are encoded
    whole where the schema is flat (`tms.hudi.avro.columnar_encoder`), the same bytes as
    row by row. `extra_header` adds header entries (a log compaction's
    `COMPACTED_BLOCK_TIMES`).
    """
    schema_json = _schema_json(schema)
    framed = framed_records(records, schema) if isinstance(records, pa.Table) else None
    if framed is not None:
        count = records.num_rows if isinstance(records, pa.Table) else 0
    else:
        rows = records.to_pylist() if isinstance(records, pa.Table) else records
        bodies = _encoded_rows(parsed_block_schema(schema_json), schema, rows)
        count, framed = len(bodies), b"".join(bodies)
    content = b"".join((_I32.pack(LOG_BLOCK_VERSION), _I32.pack(count), framed))
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema_json}
    header.update(extra_header or {})
    return encode_log_block(BlockType.AVRO_DATA, header, content)


def _encoded_rows(
    parsed: Any, schema: dict[str, Any], records: Iterable[Mapping[str, object]]
) -> list[bytes]:
    """Each record encoded by fastavro, preceded by its length."""
    convert = avro_datum_converter(schema)
    bodies: list[bytes] = []
    buf = io.BytesIO()
    for record in records:
        buf.seek(0)
        buf.truncate()
        try:
            datum = convert(record) if convert is not None else dict(record)
            fastavro.schemaless_writer(buf, parsed, datum)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise LogFormatError(f"record does not fit the block schema: {exc}") from exc
        body = buf.getvalue()
        bodies.append(_I32.pack(len(body)) + body)
    return bodies


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
    extra_header: Mapping[HeaderKey, str] | None = None,
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
    same instant, one per wrapper type, in order of first appearance. `extra_header` adds
    header entries to each (a log compaction's `COMPACTED_BLOCK_TIMES`).
    """
    kind = _field_kind(schema, ordering_field)
    groups: dict[str, list[dict[str, object]]] = {}
    for d in deletes:
        wrapped = wrap_ordering_value(d.ordering_value, kind)
        groups.setdefault(wrapped[0], []).append(
            {"recordKey": d.record_key, "partitionPath": d.partition_path, "orderingVal": wrapped}
        )
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: _schema_json(schema)}
    header.update(extra_header or {})
    blocks = [
        encode_log_block(BlockType.DELETE, header, _delete_content(items))
        for items in (groups.values() if groups else [[]])
    ]
    return b"".join(blocks)


def encode_empty_delete_block(instant_time: str) -> bytes:
    """A DELETE block deleting nothing, headed by the instant time only: what Hudi 1.x writes
    in each new metadata table file group (`initializeFileGroups`)."""
    return encode_log_block(
        BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant_time}, _delete_content([])
    )


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
