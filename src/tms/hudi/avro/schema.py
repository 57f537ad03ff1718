"""Arrow <-> Avro for the record schema Hudi writes into log blocks and commit metadata.

Hudi (through Spark's schema converter) names a table's record schema ``<table>_record`` in
namespace ``hoodie.<table>``, makes nullable columns ``["null", T]`` with a null default, and
prepends the five meta columns as nullable strings. Log blocks carry that schema in their
header and encode every record with it, so readers (Java Hudi, hudi-rs) resolve our blocks
only if we spell it the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from tms.hudi.meta_fields import META_FIELDS

__all__ = [
    "META_FIELDS",
    "arrow_schema_from_avro",
    "avro_field_type",
    "avro_record_schema",
    "avro_records_to_table",
    "table_to_avro_records",
]


_NULLABLE_STRING: list[Any] = ["null", "string"]


def _min_bytes_for_precision(precision: int) -> int:
    """Smallest fixed size holding a decimal of ``precision`` digits (as Spark sizes it)."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def avro_field_type(dtype: pa.DataType, field_name: str, namespace: str) -> Any:
    """The non-null Avro type of one Arrow column, as Spark's converter spells it for Hudi.

    ``namespace`` is the enclosing record's full name; Spark names a decimal's ``fixed`` type
    ``<namespace>.<field>.fixed``, and readers compare named types by full name.
    """
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_int8(dtype) or pa.types.is_int16(dtype) or pa.types.is_int32(dtype):
        return "int"
    if pa.types.is_int64(dtype):
        return "long"
    if pa.types.is_float32(dtype):
        return "float"
    if pa.types.is_float64(dtype):
        return "double"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return "bytes"
    if pa.types.is_date32(dtype):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(dtype):
        unit = dtype.unit
        if unit not in ("ms", "us"):
            raise ValueError(f"column {field_name!r}: Avro has no timestamp unit {unit!r}")
        suffix = "millis" if unit == "ms" else "micros"
        # A zoned timestamp is an instant (Spark TimestampType); a naive one is a wall-clock
        # value (Spark TimestampNTZType), which Avro calls a local timestamp.
        logical = f"timestamp-{suffix}" if dtype.tz is not None else f"local-timestamp-{suffix}"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_decimal(dtype) and dtype.bit_width == 128:
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{field_name}",
            "size": _min_bytes_for_precision(dtype.precision),
            "logicalType": "decimal",
            "precision": dtype.precision,
            "scale": dtype.scale,
        }
    raise ValueError(f"column {field_name!r}: unsupported Arrow type {dtype}")


def avro_record_schema(
    table_name: str, schema: pa.Schema, *, with_meta_fields: bool = True
) -> dict[str, Any]:
    """Hudi's Avro record schema for a table whose data columns are ``schema``.

    Meta columns already present in ``schema`` are not duplicated; with ``with_meta_fields``
    the missing ones are prepended (always first, in Hudi's order) as nullable strings.
    """
    namespace = f"hoodie.{table_name}"
    record_name = f"{table_name}_record"
    full_name = f"{namespace}.{record_name}"
    fields: list[dict[str, Any]] = []
    if with_meta_fields:
        fields.extend(
            {"name": name, "type": list(_NULLABLE_STRING), "doc": "", "default": None}
            for name in META_FIELDS
        )
    for field in schema:
        if field.name in META_FIELDS:
            continue
        avro_type = avro_field_type(field.type, field.name, full_name)
        if field.nullable:
            fields.append({"name": field.name, "type": ["null", avro_type], "default": None})
        else:
            fields.append({"name": field.name, "type": avro_type})
    return {"type": "record", "name": record_name, "namespace": namespace, "fields": fields}


def _arrow_type(avro_type: Any, field_name: str) -> tuple[pa.DataType, bool]:
    """Arrow type and nullability of one Avro field type (the inverse of ``avro_field_type``)."""
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"field {field_name!r}: only [null, T] unions are supported")
        dtype, _ = _arrow_type(branches[0], field_name)
        return dtype, len(branches) != len(avro_type)
    if isinstance(avro_type, dict):
        logical = avro_type.get("logicalType")
        base = avro_type.get("type")
        if logical == "date":
            return pa.date32(), False
        if logical in ("timestamp-micros", "local-timestamp-micros"):
            return pa.timestamp("us", tz="UTC" if logical == "timestamp-micros" else None), False
        if logical in ("timestamp-millis", "local-timestamp-millis"):
            return pa.timestamp("ms", tz="UTC" if logical == "timestamp-millis" else None), False
        if logical == "decimal":
            return pa.decimal128(int(avro_type["precision"]), int(avro_type.get("scale", 0))), False
        if isinstance(base, str) and base not in ("record", "fixed", "array", "map", "enum"):
            return _arrow_type(base, field_name)
        raise ValueError(f"field {field_name!r}: unsupported Avro type {avro_type}")
    primitives: dict[str, pa.DataType] = {
        "string": pa.string(),
        "boolean": pa.bool_(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "bytes": pa.binary(),
    }
    if avro_type in primitives:
        return primitives[avro_type], False
    raise ValueError(f"field {field_name!r}: unsupported Avro type {avro_type!r}")


def arrow_schema_from_avro(avro_schema: Mapping[str, Any]) -> pa.Schema:
    """Arrow schema of a flat Avro record schema (e.g. a log block's SCHEMA header)."""
    fields = []
    for field in avro_schema["fields"]:
        dtype, nullable = _arrow_type(field["type"], field["name"])
        fields.append(pa.field(field["name"], dtype, nullable=nullable))
    return pa.schema(fields)


def table_to_avro_records(table: pa.Table) -> list[dict[str, object]]:
    """Rows of ``table`` as dicts of the Python values the Avro encoder (fastavro) accepts."""
    return [dict(row) for row in table.to_pylist()]


def avro_records_to_table(records: Iterable[Mapping[str, object]], schema: pa.Schema) -> pa.Table:
    """Decoded Avro records as a table of ``schema`` (missing keys become nulls)."""
    names: Sequence[str] = schema.names
    rows = [{name: record.get(name) for name in names} for record in records]
    return pa.Table.from_pylist(rows, schema=schema)
