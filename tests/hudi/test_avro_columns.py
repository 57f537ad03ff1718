"""Data blocks decoded into Arrow columns by polars' compiled reader
(`tms.hudi.files.avro_columns`) give, field by field, what fastavro gives; schemas it is not
trusted with are left to fastavro."""

from __future__ import annotations

import io
import json
import math
import random
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from tms.hudi.avro.schema import arrow_schema_from_avro
from tms.hudi.files.avro_columns import ArrowRecords, decode_columns, reads_in_columns
from tms.hudi.files.data import block_records
from tms.hudi.files.log_block import LOG_BLOCK_VERSION, BlockType, HeaderKey, LogBlock
from tms.hudi.files.log_reader import _decode_avro_records

PLAIN_FIELDS: list[dict[str, Any]] = [
    {"name": "_hoodie_commit_time", "type": ["null", "string"]},
    {"name": "_hoodie_record_key", "type": ["null", "string"]},
    {"name": "flag", "type": "boolean"},
    {"name": "small", "type": "int"},
    {"name": "big", "type": "long"},
    {"name": "ratio", "type": "float"},
    {"name": "fare", "type": "double"},
    {"name": "city", "type": "string"},
    {"name": "blob", "type": "bytes"},
    {"name": "maybe_int", "type": ["null", "int"]},
    {"name": "maybe_double", "type": ["double", "null"]},
    {"name": "maybe_text", "type": ["string", "null"], "default": "x"},
    {"name": "maybe_blob", "type": ["null", {"type": "bytes"}], "doc": "a note"},
    {"name": "java_text", "type": {"type": "string", "avro.java.string": "String"}},
]
SCHEMA = {"type": "record", "name": "trips", "namespace": "hoodie.trips", "fields": PLAIN_FIELDS}
TEXTS = ["", "sf", "naïve café", "日本語", "emoji 🚕", "a\x00b", "x" * 300]
DOUBLES = [0.0, -0.0, 1.5, -2.25e300, 5e-324, math.inf, -math.inf, math.nan]


def random_record(rng: random.Random) -> dict[str, Any]:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.3 else value

    return {
        "_hoodie_commit_time": maybe("20260101120000000"),
        "_hoodie_record_key": maybe(f"k{rng.randrange(10**6)}"),
        "flag": rng.random() < 0.5,
        "small": rng.choice([0, -1, 2**31 - 1, -(2**31), rng.randrange(-1000, 1000)]),
        "big": rng.choice([0, 2**63 - 1, -(2**63), rng.randrange(-(10**12), 10**12)]),
        "ratio": struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0],
        "fare": rng.choice([*DOUBLES, rng.uniform(-1e9, 1e9)]),
        "city": rng.choice(TEXTS),
        "blob": bytes(rng.randrange(256) for _ in range(rng.randrange(0, 20))),
        "maybe_int": maybe(rng.randrange(-(2**31), 2**31)),
        "maybe_double": maybe(rng.choice(DOUBLES)),
        "maybe_text": maybe(rng.choice(TEXTS)),
        "maybe_blob": maybe(b"\x00\xff" * rng.randrange(0, 4)),
        "java_text": rng.choice(TEXTS),
    }


def encoded(schema: dict[str, Any], records: list[dict[str, Any]]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    bodies = []
    for record in records:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        bodies.append(out.getvalue())
    return bodies


def same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    if isinstance(left, float) and isinstance(right, float):
        return struct.pack("<d", left) == struct.pack("<d", right)  # -0.0 is not 0.0
    return type(left) is type(right) and left == right


def test_every_plain_field_decodes_as_fastavro_decodes_it() -> None:
    rng = random.Random(31)
    records = [random_record(rng) for _ in range(2000)]
    bodies = encoded(SCHEMA, records)
    table = decode_columns(bodies, json.dumps(SCHEMA))
    assert table is not None
    by_fastavro = [
        fastavro.schemaless_reader(io.BytesIO(b), fastavro.parse_schema(SCHEMA), None)
        for b in bodies
    ]
    by_columns = ArrowRecords(table)
    assert len(by_columns) == len(by_fastavro)
    for index, (ours, theirs) in enumerate(zip(by_columns, by_fastavro, strict=True)):
        assert list(ours) == list(theirs), index
        for name, value in theirs.items():
            assert same(value, ours[name]), (index, name, value, ours[name])


def test_a_block_of_plain_fields_becomes_the_table_the_records_would() -> None:
    """Through the log reader and `block_records`, with the table's schema a field wider and
    a field longer than the block's writer schema."""
    rng = random.Random(32)
    records = [random_record(rng) for _ in range(300)]
    schema_json = json.dumps(SCHEMA)
    bodies = encoded(SCHEMA, records)
    content = struct.pack(">ii", LOG_BLOCK_VERSION, len(bodies)) + b"".join(
        struct.pack(">i", len(b)) + b for b in bodies
    )
    decoded = _decode_avro_records(content, schema_json)
    assert isinstance(decoded, ArrowRecords)
    wider = {
        **SCHEMA,
        "fields": [
            *[
                {**f, "type": "long"} if f["name"] == "small" else f
                for f in PLAIN_FIELDS
                if f["name"] != "blob"
            ],
            {"name": "added", "type": ["null", "string"]},
        ],
    }
    target = arrow_schema_from_avro(wider)
    header = {HeaderKey.SCHEMA: schema_json, HeaderKey.INSTANT_TIME: "20260101120000000"}
    columns = block_records(LogBlock(BlockType.AVRO_DATA, header, records=decoded), target)
    rows = block_records(LogBlock(BlockType.AVRO_DATA, header, records=list(decoded)), target)
    assert columns.schema == rows.schema == target
    assert columns.column("added").null_count == len(records)
    assert columns.drop_columns(["ratio", "fare", "maybe_double"]).equals(
        rows.drop_columns(["ratio", "fare", "maybe_double"])
    )
    for name in ("ratio", "fare", "maybe_double"):
        pairs = zip(columns.column(name).to_pylist(), rows.column(name).to_pylist(), strict=True)
        assert all(a is b is None or same(a, b) for a, b in pairs), name


@pytest.mark.parametrize(
    "field_type",
    [
        {"type": "record", "name": "inner", "fields": [{"name": "x", "type": "int"}]},
        {"type": "array", "items": "int"},
        {"type": "map", "values": "string"},
        {"type": "enum", "name": "colour", "symbols": ["RED", "BLUE"]},
        {"type": "fixed", "name": "four", "size": 4},
        {"type": "int", "logicalType": "date"},
        {"type": "long", "logicalType": "timestamp-micros"},
        {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        {"type": "string", "logicalType": "uuid"},
        ["null", "int", "string"],
        ["int", "string"],
    ],
)
def test_other_fields_are_left_to_fastavro(field_type: Any) -> None:
    schema = {
        "type": "record",
        "name": "trips",
        "fields": [{"name": "id", "type": "string"}, {"name": "other", "type": field_type}],
    }
    assert not reads_in_columns(json.dumps(schema))
    assert decode_columns([b"\x02a\x00"], json.dumps(schema)) is None


def test_records_that_do_not_decode_are_left_to_fastavro() -> None:
    schema_json = json.dumps(SCHEMA)
    assert reads_in_columns(schema_json)
    assert decode_columns([b"\x01"], schema_json) is None
    assert decode_columns([], schema_json) is None
    assert not reads_in_columns("not json")


def test_arrow_records_read_as_a_sequence_of_dicts() -> None:
    table = pa.table({"a": [1, 2, 3], "b": ["x", None, "z"]})
    records = ArrowRecords(table)
    assert len(records) == 3
    assert records[1] == {"a": 2, "b": None}
    assert list(records[1:]) == [{"a": 2, "b": None}, {"a": 3, "b": "z"}]
    assert [r["a"] for r in records] == [1, 2, 3]


@pytest.mark.parametrize("padding", [b"\x02", b"\x00", b"\x02a"])
def test_a_record_with_bytes_after_its_end_is_left_to_fastavro(padding: bytes) -> None:
    """polars reads the records' bytes as one run, so bytes after a record (which Hudi's reader
    skips, reading each record on its own) would shift the records after it: such a block is
    found by the records' encoded sizes and read record by record."""
    rng = random.Random(33)
    bodies = encoded(SCHEMA, [random_record(rng) for _ in range(3)])
    bodies[1] += padding
    assert decode_columns(bodies, json.dumps(SCHEMA)) is None


def test_a_varint_longer_than_its_shortest_form_is_left_to_fastavro() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "n", "type": "long"}]}
    assert decode_columns([b"\x02", b"\x04"], json.dumps(schema)) is not None
    assert decode_columns([b"\x02", b"\x84\x00"], json.dumps(schema)) is None
