"""Avro's binary encoding of a table's rows, column by column: the body of a log file's data
block (each record framed by its length, as Hudi's `HoodieAvroDataBlock` writes it) without a
Python step per record and field.

Each field's values are encoded for the whole column at once (zigzag varints, lengths and
bytes, little-endian floats, a union's branch index), then the fields of each row are joined
in Arrow's own code. Only flat records of primitive fields (optionally in a union with
"null") are encoded this way; a schema with anything else (logical types, records, arrays,
maps, enums, fixed) gets None, and the caller encodes its rows one by one with fastavro,
whose bytes these equal (`tests/hudi/test_columnar_encoder.py` holds them to it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["framed_records"]

_BYTES = pa.large_binary()
_EMPTY = pa.scalar(b"", _BYTES)
_MAX_VARINT_BYTES = 10


def framed_records(table: pa.Table, schema: Mapping[str, Any]) -> bytes | None:
    """The rows of `table` encoded as records of the Avro record `schema`, each preceded by
    its length as a big-endian int32; None when the schema has a field this encoder does not
    take, or a field has no column of a type that fits it."""
    fields: Sequence[Mapping[str, Any]] = schema.get("fields") or []
    if schema.get("type") != "record" or not fields or table.num_rows == 0:
        return None
    parts: list[pa.Array] = []
    for field in fields:
        if field["name"] not in table.column_names:
            return None
        column = table.column(field["name"]).combine_chunks()
        encoded = _field(field["type"], column)
        if encoded is None:
            return None
        parts += encoded
    body = pc.binary_join_element_wise(*parts, _EMPTY)
    lengths = pc.binary_length(body).to_numpy().astype(">i4")
    framed = pc.binary_join_element_wise(_fixed_width(lengths.view(np.uint8), 4), body, _EMPTY)
    return _data(framed)


def _field(avro_type: Any, column: pa.Array) -> list[pa.Array] | None:
    """The encoded parts of one field for every row (a union's branch index, then its
    value), or None."""
    if isinstance(avro_type, list):
        if len(avro_type) != 2 or "null" not in avro_type:
            return None
        null_index = avro_type.index("null")
        value = _value(avro_type[1 - null_index], column)
        if value is None:
            return None
        null_branch = pa.scalar(bytes([2 * null_index]), _BYTES)  # zigzag of the index
        value_branch = pa.scalar(bytes([2 * (1 - null_index)]), _BYTES)
        branch = pc.if_else(column.is_valid(), value_branch, null_branch)
        return [branch, value.fill_null(_EMPTY)]
    value = _value(avro_type, column)
    if value is None or value.null_count:
        return None  # fastavro refuses a null there: its message is the one to give
    return [value]


def _value(avro_type: Any, column: pa.Array) -> pa.Array | None:
    """Each row's value encoded (null where the column is null), or None."""
    if isinstance(avro_type, dict):
        if set(avro_type) - {"type", "avro.java.string"}:
            return None  # logical types and named or nested types
        avro_type = avro_type["type"]
    kind = column.type
    if avro_type == "string" and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return _length_prefixed(column.cast(_BYTES))
    if avro_type == "bytes" and (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        return _length_prefixed(column.cast(_BYTES))
    if avro_type in ("long", "int") and pa.types.is_integer(kind):
        if kind.bit_width > (
            32 if avro_type == "int" else 63 if pa.types.is_unsigned_integer(kind) else 64
        ):
            return None  # values the Avro type cannot hold: fastavro's refusal stands
        values = column.fill_null(0).to_numpy().astype(np.int64)
        return _with_nulls(_varints((values << 1) ^ (values >> 63)), column)
    if avro_type == "double" and pa.types.is_floating(kind) and kind.bit_width >= 32:
        values = column.fill_null(0).to_numpy().astype("<f8")
        return _with_nulls(_fixed_width(values.view(np.uint8), 8), column)
    if avro_type == "float" and pa.types.is_float32(kind):
        values = column.fill_null(0).to_numpy().astype("<f4")
        return _with_nulls(_fixed_width(values.view(np.uint8), 4), column)
    if avro_type == "boolean" and pa.types.is_boolean(kind):
        values = column.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
        return _with_nulls(_fixed_width(values, 1), column)
    return None


def _length_prefixed(values: pa.Array) -> pa.Array:
    """Avro's bytes and strings: the length as a zigzag varint, then the bytes."""
    lengths = pc.binary_length(values.fill_null(_EMPTY)).to_numpy().astype(np.uint64)
    return pc.binary_join_element_wise(_varints(lengths << np.uint64(1)), values, _EMPTY)


def _varints(zigzag: np.ndarray) -> pa.Array:
    """Each (already zigzagged) value as Avro's variable-length integer: 7 bits a byte,
    low bits first, the high bit set on every byte but the last."""
    unsigned = zigzag.astype(np.uint64)
    widths = np.ones(len(unsigned), dtype=np.int64)
    rest = unsigned >> np.uint64(7)
    while rest.any():
        widths += rest != 0
        rest >>= np.uint64(7)
    most = int(widths.max()) if len(widths) else 1
    matrix = np.empty((len(unsigned), min(most, _MAX_VARINT_BYTES)), dtype=np.uint8)
    for k in range(matrix.shape[1]):
        low = (unsigned >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = (widths > k + 1).astype(np.uint64) << np.uint64(7)
        matrix[:, k] = (low | more).astype(np.uint8)
    data = matrix[np.arange(matrix.shape[1]) < widths[:, None]]
    offsets = np.zeros(len(unsigned) + 1, dtype=np.int64)
    np.cumsum(widths, out=offsets[1:])
    return pa.LargeBinaryArray.from_buffers(
        _BYTES, len(unsigned), [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())]
    )


def _fixed_width(data: np.ndarray, width: int) -> pa.Array:
    """`data`, a row of `width` bytes each, as one binary value per row."""
    rows = len(data) // width
    offsets = np.arange(rows + 1, dtype=np.int64) * width
    return pa.LargeBinaryArray.from_buffers(
        _BYTES, rows, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )


def _with_nulls(values: pa.Array, column: pa.Array) -> pa.Array:
    if not column.null_count:
        return values
    return pc.if_else(column.is_valid(), values, pa.scalar(None, _BYTES))


def _data(values: pa.Array) -> bytes:
    """The bytes of every value of a binary array, one after the other."""
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)
    start, end = int(offsets[values.offset]), int(offsets[values.offset + len(values)])
    data: bytes = values.buffers()[2].slice(start, end - start).to_pybytes()
    return data
