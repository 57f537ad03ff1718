"""Arrow <-> Avro for the record schema Hudi writes into log blocks and commit metadata.

Hudi (through Spark's schema converter) names a table's record schema ``<table>_record`` in
namespace ``hoodie.<table>``, makes nullable columns ``["null", T]`` with a null default, and
prepends the five meta columns as nullable strings. A nested struct ``f`` becomes a record
named ``f`` in the namespace of the enclosing record's full name, and so do the record items of
an array or the record values of a map named ``f``; a decimal becomes a ``fixed`` named
``<enclosing record>.<f>.fixed``. Log blocks carry that schema in their header and encode every
record with it, so readers (Java Hudi, hudi-rs) resolve our blocks only if we spell it the
same way.

Avro types that Arrow cannot tell apart from another one (an enum read as a string, a
``fixed`` that is not a decimal, a decimal stored as ``bytes``) keep their Avro form in the
Arrow field's metadata under ``AVRO_TYPE_KEY``, so Avro -> Arrow -> Avro gives the type back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from tms.hudi.meta_fields import META_FIELDS

__all__ = [
    "AVRO_TYPE_KEY",
    "META_FIELDS",
    "arrow_field_from_avro",
    "arrow_schema_from_avro",
    "avro_datum_converter",
    "avro_field_type",
    "avro_record_schema",
    "avro_records_to_table",
    "table_to_avro_records",
    "with_meta_fields",
]

AVRO_TYPE_KEY = b"hoodie.avro.type"
"""Arrow field metadata holding the Avro type a plain Arrow type cannot express."""

_NULLABLE_STRING: list[Any] = ["null", "string"]
_NAMED = ("record", "enum", "fixed")
_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
}


def _min_bytes_for_precision(precision: int) -> int:
    """Smallest fixed size holding a decimal of ``precision`` digits (as Spark sizes it)."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def _nullable_type(avro_type: Any, nullable: bool) -> Any:
    return ["null", avro_type] if nullable else avro_type


def _stored_avro_type(field: pa.Field) -> Any | None:
    metadata = field.metadata or {}
    text = metadata.get(AVRO_TYPE_KEY)
    return json.loads(text) if text is not None else None


def avro_field_type(
    dtype: pa.DataType, field_name: str, namespace: str, field: pa.Field | None = None
) -> Any:
    """The non-null Avro type of one Arrow column, as Spark's converter spells it for Hudi.

    ``namespace`` is the enclosing record's full name; Spark names a nested record ``f``
    ``<namespace>.f`` and a decimal's ``fixed`` type ``<namespace>.<f>.fixed``, and readers
    compare named types by full name. ``field`` (when given) may carry the Avro type in its
    metadata, which then wins.
    """
    if field is not None and (stored := _stored_avro_type(field)) is not None:
        return stored
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
    if pa.types.is_fixed_size_binary(dtype):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{field_name}",
            "size": dtype.byte_width,
        }
    if pa.types.is_date32(dtype):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_time32(dtype) and dtype.unit == "ms":
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(dtype) and dtype.unit == "us":
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_timestamp(dtype):
        unit = dtype.unit
        if unit not in ("ms", "us"):
            raise ValueError(f"column {field_name!r}: Avro has no timestamp unit {unit!r}")
        suffix = "millis" if unit == "ms" else "micros"
        # A zoned timestamp is an instant (Spark TimestampType); a naive one is a wall-clock
        # value (Spark TimestampNTZType), which Avro calls a local timestamp.
        logical = f"timestamp-{suffix}" if dtype.tz is not None else f"local-timestamp-{suffix}"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_decimal(dtype) and dtype.bit_width in (64, 128):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{field_name}",
            "size": _min_bytes_for_precision(dtype.precision),
            "logicalType": "decimal",
            "precision": dtype.precision,
            "scale": dtype.scale,
        }
    if pa.types.is_struct(dtype):
        full_name = f"{namespace}.{field_name}"
        return {
            "type": "record",
            "name": field_name,
            "namespace": namespace,
            "fields": [_avro_field(child, full_name) for child in dtype],
        }
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        item = dtype.value_field
        items = avro_field_type(item.type, field_name, namespace, item)
        return {"type": "array", "items": _nullable_type(items, item.nullable)}
    if pa.types.is_map(dtype):
        if not pa.types.is_string(dtype.key_type):
            raise ValueError(f"column {field_name!r}: Avro map keys are strings, not {dtype}")
        item = dtype.item_field
        values = avro_field_type(item.type, field_name, namespace, item)
        return {"type": "map", "values": _nullable_type(values, item.nullable)}
    raise ValueError(f"column {field_name!r}: unsupported Arrow type {dtype}")


def _avro_field(field: pa.Field, namespace: str) -> dict[str, Any]:
    """One Avro record field; nullable ones default to null, as Hudi's converter makes them."""
    avro_type = avro_field_type(field.type, field.name, namespace, field)
    if field.nullable:
        return {"name": field.name, "type": ["null", avro_type], "default": None}
    return {"name": field.name, "type": avro_type}


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
        fields.append(_avro_field(field, full_name))
    return {"type": "record", "name": record_name, "namespace": namespace, "fields": fields}


def with_meta_fields(avro_schema: Mapping[str, Any]) -> dict[str, Any]:
    """A table's record schema as its files carry it: Hudi's meta fields first.

    Hudi records the schema in commit metadata without them; readers of base files and log
    blocks need them (the record key above all).
    """
    fields = list(avro_schema.get("fields") or [])
    present = {f["name"] for f in fields}
    meta = [
        {"name": name, "type": list(_NULLABLE_STRING), "doc": "", "default": None}
        for name in META_FIELDS
        if name not in present
    ]
    return {**avro_schema, "fields": meta + fields}


def _full_name(node: Mapping[str, Any], namespace: str) -> str:
    name = str(node["name"])
    if "." in name:
        return name
    space = node.get("namespace", namespace)
    return f"{space}.{name}" if space else name


class _Names:
    """Named types seen so far in one schema, so later references by name resolve."""

    def __init__(self) -> None:
        self.types: dict[str, Any] = {}

    def resolve(self, avro_type: str, namespace: str, field_name: str) -> Any:
        for candidate in (avro_type, f"{namespace}.{avro_type}"):
            if candidate in self.types:
                return self.types[candidate]
        raise ValueError(f"field {field_name!r}: unsupported Avro type {avro_type!r}")


def _arrow_type(
    avro_type: Any, field_name: str, namespace: str, names: _Names
) -> tuple[pa.DataType, bool, Any | None]:
    """Arrow type, nullability and (where Arrow loses it) the Avro type of one Avro type."""
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"field {field_name!r}: only [null, T] unions are supported")
        dtype, _, kept = _arrow_type(branches[0], field_name, namespace, names)
        return dtype, len(branches) != len(avro_type), kept
    if isinstance(avro_type, str):
        if avro_type in _PRIMITIVES:
            return _PRIMITIVES[avro_type], False, None
        return _arrow_type(
            names.resolve(avro_type, namespace, field_name), field_name, namespace, names
        )
    if not isinstance(avro_type, dict):
        raise ValueError(f"field {field_name!r}: unsupported Avro type {avro_type!r}")
    logical = avro_type.get("logicalType")
    base = avro_type.get("type")
    if base in _NAMED:
        full = _full_name(avro_type, namespace)
        names.types.setdefault(full, avro_type)
        namespace = full.rsplit(".", 1)[0] if "." in full else ""
    if logical == "date" and base == "int":
        return pa.date32(), False, None
    if logical == "time-millis" and base == "int":
        return pa.time32("ms"), False, None
    if logical == "time-micros" and base == "long":
        return pa.time64("us"), False, None
    if logical in ("timestamp-micros", "local-timestamp-micros") and base == "long":
        tz = "UTC" if logical == "timestamp-micros" else None
        return pa.timestamp("us", tz=tz), False, None
    if logical in ("timestamp-millis", "local-timestamp-millis") and base == "long":
        tz = "UTC" if logical == "timestamp-millis" else None
        return pa.timestamp("ms", tz=tz), False, None
    if logical == "decimal" and base in ("bytes", "fixed"):
        precision, scale = int(avro_type["precision"]), int(avro_type.get("scale", 0))
        dtype = pa.decimal128(precision, scale)
        spark_form = base == "fixed" and avro_type["size"] == _min_bytes_for_precision(precision)
        return dtype, False, None if spark_form else avro_type
    if base == "fixed":
        return pa.binary(int(avro_type["size"])), False, avro_type
    if base == "enum":
        return pa.string(), False, avro_type
    if base == "record":
        full = _full_name(avro_type, namespace)
        children = [_arrow_field(f, full, names) for f in avro_type["fields"]]
        return pa.struct(children), False, None
    if base == "array":
        dtype, nullable, kept = _arrow_type(avro_type["items"], field_name, namespace, names)
        item = pa.field("element", dtype, nullable=nullable, metadata=_metadata(kept))
        return pa.list_(item), False, None
    if base == "map":
        dtype, nullable, kept = _arrow_type(avro_type["values"], field_name, namespace, names)
        value = pa.field("value", dtype, nullable=nullable, metadata=_metadata(kept))
        return pa.map_(pa.field("key", pa.string(), nullable=False), value), False, None
    if isinstance(base, str) and base in _PRIMITIVES:
        # A logical type Arrow has no type for (uuid, ...): the primitive, the rest kept.
        return _PRIMITIVES[base], False, avro_type if logical is not None else None
    if isinstance(base, list | dict):
        return _arrow_type(base, field_name, namespace, names)
    raise ValueError(f"field {field_name!r}: unsupported Avro type {avro_type}")


def _metadata(avro_type: Any | None) -> dict[bytes, bytes] | None:
    return None if avro_type is None else {AVRO_TYPE_KEY: json.dumps(avro_type).encode()}


def _arrow_field(avro_field: Mapping[str, Any], namespace: str, names: _Names) -> pa.Field:
    name = str(avro_field["name"])
    dtype, nullable, kept = _arrow_type(avro_field["type"], name, namespace, names)
    return pa.field(name, dtype, nullable=nullable, metadata=_metadata(kept))


def arrow_field_from_avro(avro_field: Mapping[str, Any], namespace: str = "") -> pa.Field:
    """Arrow field of one Avro record field (nested records, arrays and maps included)."""
    return _arrow_field(avro_field, namespace, _Names())


def arrow_schema_from_avro(avro_schema: Mapping[str, Any]) -> pa.Schema:
    """Arrow schema of an Avro record schema (e.g. a log block's SCHEMA header)."""
    names = _Names()
    full = _full_name(avro_schema, "") if "name" in avro_schema else ""
    if full:
        names.types[full] = avro_schema
    return pa.schema([_arrow_field(f, full, names) for f in avro_schema["fields"]])


# ---------------------------------------------------------------------------------------------
# Values: Arrow's Python form of a row and the form fastavro encodes differ only for maps
# (Arrow gives a list of (key, value) pairs, Avro wants a dict).

Converter = Callable[[Any], Any]


def _converter(
    avro_type: Any, names: dict[str, Converter | None], namespace: str
) -> Converter | None:
    """A function making a value of ``avro_type`` fit fastavro, or None when none is needed.

    ``names`` maps the full names of records seen so far to their converters, for references.
    """
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        if len(branches) != 1:
            return None
        only = _converter(branches[0], names, namespace)
        if only is None:
            return None
        return lambda value: None if value is None else only(value)
    if isinstance(avro_type, str):
        for candidate in (avro_type, f"{namespace}.{avro_type}"):
            if candidate in names:
                return names[candidate]
        return None
    if not isinstance(avro_type, dict):
        return None
    base = avro_type.get("type")
    if base == "record":
        full = _full_name(avro_type, namespace)
        names[full] = None
        fields = [
            (f["name"], c) for f in avro_type["fields"] if (c := _converter(f["type"], names, full))
        ]
        if not fields:
            return None

        def record(value: Any) -> Any:
            if value is None:
                return None
            out = dict(value)
            for name, convert in fields:
                if name in out:
                    out[name] = convert(out[name])
            return out

        names[full] = record
        return record
    if base == "array":
        item = _converter(avro_type["items"], names, namespace)
        if item is None:
            return None
        return lambda value: None if value is None else [item(v) for v in value]
    if base == "map":
        values = _converter(avro_type["values"], names, namespace)

        def mapping(value: Any) -> Any:
            if value is None:
                return None
            pairs = value.items() if isinstance(value, Mapping) else value
            if values is None:
                return dict(pairs)
            return {k: values(v) for k, v in pairs}

        return mapping
    if isinstance(base, list | dict):
        return _converter(base, names, namespace)
    return None


def avro_datum_converter(avro_schema: Mapping[str, Any]) -> Converter | None:
    """For a record schema: a function turning a row as Arrow gives it (``to_pylist``) into
    the datum fastavro encodes; None when the rows already fit (no maps in the schema)."""
    return _converter(dict(avro_schema), {}, "")


def table_to_avro_records(
    table: pa.Table, avro_schema: Mapping[str, Any] | None = None
) -> list[dict[str, object]]:
    """Rows of ``table`` as dicts of the Python values the Avro encoder (fastavro) accepts."""
    rows = table.to_pylist()
    convert = (
        avro_datum_converter(avro_schema)
        if avro_schema is not None
        else avro_datum_converter(avro_record_schema("t", table.schema, with_meta_fields=False))
    )
    if convert is None:
        return [dict(row) for row in rows]
    return [convert(row) for row in rows]


def avro_records_to_table(records: Iterable[Mapping[str, object]], schema: pa.Schema) -> pa.Table:
    """Decoded Avro records as a table of ``schema`` (missing keys become nulls, keys the
    schema lacks are dropped). The records go to Arrow as one struct array, converted in
    Arrow's own code rather than a Python step per record and field (a compaction turns
    every log record of its slices into rows this way); every field is taken as nullable,
    as `Table.from_pylist` takes them, so the schema is applied as given afterwards."""
    loose = pa.struct([field.with_nullable(True) for field in schema])
    rows = pa.array(records if isinstance(records, list) else list(records), type=loose)
    columns = pa.Table.from_struct_array(rows).columns
    return pa.Table.from_arrays(columns, schema=schema)
