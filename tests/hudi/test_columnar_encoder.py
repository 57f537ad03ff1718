"""The column-by-column Avro encoding of a log block's records gives exactly the bytes fastavro
gives row by row, on random tables of every type it takes, nulls, extremes and non-ASCII
text among them; a schema it does not take falls back to fastavro."""

from __future__ import annotations

import io
import math
import random
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from tms.hudi.avro.columnar_encoder import framed_records
from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.files.log_writer import encode_avro_data_block

TEXT = ["", "a", "key-000017", "ünïcødé", "日本語", "x" * 300, "\u0000nul"]
LONGS = [0, 1, -1, 63, 64, -64, -65, 2**31 - 1, -(2**31), 2**62, 2**63 - 1, -(2**63)]
INTS = [0, 1, -1, 127, 128, -129, 2**31 - 1, -(2**31)]
DOUBLES = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, 1e308, 5e-324, math.pi]


def by_fastavro(table: pa.Table, schema: dict[str, Any]) -> bytes:
    parsed = fastavro.parse_schema(schema)
    out = b""
    for row in table.to_pylist():
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        out += struct.pack(">i", len(buf.getvalue())) + buf.getvalue()
    return out


def random_table(rng: random.Random, rows: int, nulls: bool) -> pa.Table:
    def maybe(values: list[Any]) -> list[Any]:
        return [None if nulls and rng.random() < 0.3 else v for v in values]

    def column(make: Any, kind: pa.DataType | None = None) -> pa.Array:
        return pa.array(maybe([make(i) for i in range(rows)]), kind)

    return pa.table(
        {
            "s": column(lambda i: rng.choice(TEXT) + str(i), pa.string()),
            "b": column(lambda _: rng.randbytes(rng.randrange(0, 20))),
            "l": column(lambda _: rng.choice(LONGS), pa.int64()),
            "i": column(lambda _: rng.choice(INTS), pa.int32()),
            "d": column(lambda _: rng.choice(DOUBLES) * rng.random(), pa.float64()),
            "f": column(lambda _: rng.uniform(-1e6, 1e6), pa.float32()),
            "t": column(lambda _: rng.random() < 0.5, pa.bool_()),
            "ls": column(lambda _: rng.choice(TEXT), pa.large_string()),
            "small": column(lambda _: rng.randrange(-128, 128), pa.int8()),
        }
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_columns_encode_as_fastavro_encodes_each_row(seed: int, nulls: bool) -> None:
    rng = random.Random(seed)
    table = random_table(rng, rng.randrange(1, 400), nulls)
    schema = avro_record_schema("t", table.schema, with_meta_fields=False)
    if not nulls:  # the same columns as plain (non-union) fields
        schema = {**schema, "fields": [
            {"name": f["name"], "type": next(t for t in f["type"] if t != "null")}
            if isinstance(f["type"], list) else f
            for f in schema["fields"]
        ]}  # fmt: skip
    assert framed_records(table, schema) == by_fastavro(table, schema)


def test_a_union_with_null_first_or_last_and_a_sliced_table() -> None:
    table = pa.table({"k": ["a", None, "ccc", None], "v": [1, None, -300, 7]}).slice(1, 3)
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "k", "type": ["null", "string"]},
            {"name": "v", "type": ["long", "null"]},
        ],
    }
    assert framed_records(table, schema) == by_fastavro(table, schema)


@pytest.mark.parametrize(
    ("avro_type", "column"),
    [
        ({"type": "long", "logicalType": "timestamp-micros"}, pa.array([1], pa.int64())),
        ({"type": "array", "items": "long"}, pa.array([[1]])),
        ("int", pa.array([2**40], pa.int64())),  # does not fit an int
        ("long", pa.array([None], pa.int64())),  # a null where the schema takes none
        ("string", pa.array([1], pa.int64())),  # a column of another type
    ],
    ids=["logical-type", "array", "int-overflow", "null-not-allowed", "mismatch"],
)
def test_what_it_does_not_take_is_left_to_fastavro(avro_type: Any, column: pa.Array) -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": avro_type}]}
    assert framed_records(pa.table({"x": column}), schema) is None


def test_a_data_block_from_a_table_reads_back_as_its_rows() -> None:
    table = random_table(random.Random(7), 50, nulls=True)
    schema = avro_record_schema("t", table.schema, with_meta_fields=False)
    from_table = encode_avro_data_block("20261207000000000", schema, table)
    assert from_table == encode_avro_data_block("20261207000000000", schema, table.to_pylist())
    (block,) = read_log_blocks(from_table)
    assert block.schema is not None and len(list(block.records)) == table.num_rows
