"""A data block's records decoded straight into Arrow columns by a compiled reader.

fastavro decodes each record of an Avro data block into a Python dict, and a compaction then
turns those dicts into Arrow columns: per record and field, Python work that made up a third
of a compaction's time. polars' Avro reader decodes the same bytes into Arrow columns in
compiled code (about ten times faster on the records of a usual table). It is given the block's
records as one Avro object container file: the block's SCHEMA header (each field's name and
type) as the file's schema, the records' bytes as one data block.

Only schemas whose every field is a plain value (`boolean`, `int`, `long`, `float`,
`double`, `string`, `bytes`, each alone or in a union with `null`) and that carry no logical
type are read this way: what the two readers give for those is the same value (tested field by
field against fastavro). Anything else (nested records, arrays, maps, enums, fixed, decimals,
dates, timestamps, unions of two types) is left to fastavro, as is a block polars cannot read
or reads to another number of rows.
"""

from __future__ import annotations

import functools
import io
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any, overload

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.avro.binary import encode_long

__all__ = ["ArrowRecords", "decode_columns", "reads_in_columns"]

log = logging.getLogger(__name__)

PLAIN_TYPES = frozenset({"boolean", "int", "long", "float", "double", "string", "bytes"})
_SYNC = b"tms-avro-column!"
"""The 16-byte sync marker of the container file built in memory."""


PlainField = tuple[str, str, bool]
"""A field read into a column: its name, its plain type, and whether it is nullable."""


def reads_in_columns(schema_json: str) -> bool:
    """Whether a SCHEMA header's records are read into columns here (see the module)."""
    return _container_schema(schema_json) is not None


@functools.lru_cache(maxsize=64)
def _container_schema(schema_json: str) -> tuple[str, tuple[PlainField, ...]] | None:
    """The schema the container file is given, and its fields: the header's record with each
    field's name and type alone. Defaults, docs and aliases only matter when one schema reads
    data another wrote, and here the writer's schema reads its own data (polars refuses some
    defaults)."""
    try:
        schema = json.loads(schema_json)
    except ValueError:
        return None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    fields = schema.get("fields")
    if not isinstance(fields, list) or not fields or not all(isinstance(f, dict) for f in fields):
        return None
    names = [f.get("name") for f in fields]
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        return None
    types = [_plain(f.get("type")) for f in fields]
    if None in types:
        return None
    plain = [{"name": n, "type": t} for n, t in zip(names, types, strict=True)]
    fields = tuple(
        (n, next(b for b in t if b != "null"), True) if isinstance(t, list) else (n, t, False)
        for n, t in zip(names, types, strict=True)
    )
    return json.dumps({"type": "record", "name": "block", "fields": plain}), fields


def _plain(node: Any) -> Any | None:
    """The type with its plain values' attributes dropped (`{"type": "string",
    "avro.java.string": "String"}` is `"string"`), or None when it is not plain."""
    if isinstance(node, str):
        return node if node in PLAIN_TYPES else None
    if isinstance(node, dict):
        if "logicalType" in node or node.get("type") not in PLAIN_TYPES:
            return None
        return node["type"]
    if isinstance(node, list) and len(node) == 2 and "null" in node:
        branches = [b if b == "null" else _plain(b) for b in node]
        return None if None in branches else branches
    return None


def decode_columns(bodies: Sequence[bytes], schema_json: str) -> pa.Table | None:
    """The records (each its Avro bytes) as a table, one column per field of the schema, or
    None when they are not read here (the caller decodes them with fastavro)."""
    container = _container_schema(schema_json)
    if not bodies or container is None:
        return None
    import polars  # here, not at start-up: only Spark tasks that read log blocks need it

    container_schema, fields = container
    data = b"".join(bodies)
    container_file = b"".join(
        [
            b"Obj\x01",
            encode_long(2),
            _bytes(b"avro.schema"),
            _bytes(container_schema.encode("utf-8")),
            _bytes(b"avro.codec"),
            _bytes(b"null"),
            encode_long(0),
            _SYNC,
            encode_long(len(bodies)),
            encode_long(len(data)),
            data,
            _SYNC,
        ]
    )
    try:
        table = polars.read_avro(io.BytesIO(container_file)).to_arrow()
    except Exception as exc:  # polars' own errors have no common base class to name
        log.debug("Avro block not read into columns (%s); decoding it record by record", exc)
        return None
    if table.num_rows != len(bodies) or table.column_names != [name for name, _, _ in fields]:
        return None
    sizes = pa.array([len(body) for body in bodies], pa.int64())
    if not pc.all(pc.equal(encoded_sizes(table, fields), sizes)).as_py():
        # a record the reader did not end where its bytes end: bytes after a record (which
        # Hudi's reader skips) or a varint not in its shortest form
        return None
    return table


def encoded_sizes(table: pa.Table, fields: Sequence[PlainField]) -> pa.Array:
    """The bytes each row takes in Avro's binary encoding of `fields` (plain types, shortest
    varints, as every Avro writer writes them): a record decoded from a body of just that
    many bytes began and ended where its body does."""
    total = pa.repeat(pa.scalar(0, pa.int64()), table.num_rows)
    for (_, avro_type, nullable), column in zip(fields, table.columns, strict=True):
        size = _value_sizes(column, avro_type)
        if nullable:  # the branch's index (one byte), then the value unless it is null
            size = pc.add(pc.if_else(pc.is_null(column), 0, size), 1)
        total = pc.add(total, size)
    return total


def _value_sizes(column: pa.ChunkedArray, avro_type: str) -> pa.ChunkedArray:
    if avro_type == "boolean":
        return pc.if_else(pc.is_null(column), 0, 1)
    if avro_type == "float":
        return pc.if_else(pc.is_null(column), 0, 4)
    if avro_type == "double":
        return pc.if_else(pc.is_null(column), 0, 8)
    if avro_type in ("int", "long"):
        return _varint_sizes(column.cast(pa.int64()))
    lengths = pc.binary_length(column).cast(pa.int64())  # string, bytes: a length, the bytes
    return pc.add(_varint_sizes(lengths), lengths)


def _varint_sizes(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Bytes of each value as a zig-zag varint: one, and one more for each k in 1..9 with
    zigzag(v) >= 2^(7k), that is v >= 2^(7k-1) or v < -2^(7k-1)."""
    size = pc.if_else(pc.is_null(values), 0, 1)
    for k in range(1, 10):
        bound = 1 << (7 * k - 1)
        longer = pc.or_(pc.greater_equal(values, bound), pc.less(values, -bound))
        size = pc.add(size, pc.if_else(pc.fill_null(longer, False), 1, 0))
    return size


def _bytes(value: bytes) -> bytes:
    return encode_long(len(value)) + value


class ArrowRecords(Sequence[dict[str, object]]):
    """A data block's records held as Arrow columns: read as a table where one is wanted
    (`as_table`), and as dicts, made on first use, by every other reader of the block."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self._rows: list[dict[str, object]] | None = None

    def as_table(self, schema: pa.Schema) -> pa.Table:
        """The records in `schema`: its columns in its order and types, a column the block
        lacks as nulls, one the schema lacks dropped (as decoded dicts become rows)."""
        columns = [
            self.table.column(f.name).cast(f.type)
            if f.name in self.table.column_names
            else pa.nulls(self.table.num_rows, f.type)
            for f in schema
        ]
        return pa.Table.from_arrays(columns, schema=schema)

    def _materialized(self) -> list[dict[str, object]]:
        if self._rows is None:
            self._rows = self.table.to_pylist()
        return self._rows

    def __len__(self) -> int:
        rows: int = self.table.num_rows
        return rows

    @overload
    def __getitem__(self, index: int) -> dict[str, object]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[dict[str, object]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, object] | Sequence[dict[str, object]]:
        return self._materialized()[index]

    def __iter__(self) -> Iterator[dict[str, object]]:
        return iter(self._materialized())

    def __eq__(self, other: object) -> bool:
        """Equal to a sequence of the same records, as a list of them is."""
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return self._materialized() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]
