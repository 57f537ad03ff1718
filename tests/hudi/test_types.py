"""Every Avro type Hudi writes passes through the schema mapping, log blocks and slice reads.

Hudi's record schemas (Spark's converter with Hudi's null-first unions and null defaults) nest
records in arrays and maps of nullable records, store decimals as ``fixed`` (or ``bytes``),
and use logical types for dates and timestamps; Avro-native writers add enums and ``fixed``.
Each must map to Arrow and back to the same Avro type, and its values must survive an Avro
block, a Parquet block, and a slice read whose files were written under different schemas.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
import zipfile
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests import oracle
from tests.fixture_paths import HUDI_TABLES

from tms.hudi.avro.schema import (
    AVRO_TYPE_KEY,
    arrow_schema_from_avro,
    avro_record_schema,
    table_to_avro_records,
    with_meta_fields,
)
from tms.hudi.files.data import block_records, write_base_file
from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
from tms.hudi.files.log_block import BlockType
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.files.log_writer import encode_avro_data_block
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.files.reader import conform_table, read_file_slice
from tms.hudi.meta_fields import COMMIT_TIME, META_FIELDS, RECORD_KEY
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.storage import Storage
from tms.testing.sample_writer.log_blocks import (
    LogBlockFormat,
    encode_parquet_data_block,
    write_data_log_file,
)
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

NS = "hoodie.t.t_record"
UTC = dt.UTC


def _meta(avro_type: dict[str, Any]) -> dict[bytes, bytes]:
    return {AVRO_TYPE_KEY: json.dumps(avro_type).encode()}


ENUM = {"type": "enum", "name": "Color", "namespace": "hoodie.t", "symbols": ["RED", "BLUE"]}
FIXED = {"type": "fixed", "name": "Hash", "namespace": "hoodie.t", "size": 4}
UUID = {"type": "string", "logicalType": "uuid"}
BYTES_DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}
ARR_ITEM = pa.struct([("f1", pa.string()), ("f2", pa.int32())])
MAP_VALUE = pa.struct([("v1", pa.float64()), ("v2", pa.bool_())])
NESTED = pa.struct([("a", pa.string()), ("child", pa.struct([("c", pa.float64())]))])

# (Arrow field, the Avro type Hudi's converter writes for it, two values (one may be null))
CASES: dict[str, tuple[pa.Field, Any, list[Any]]] = {
    "int": (pa.field("x", pa.int32()), "int", [7, None]),
    "long": (pa.field("x", pa.int64()), "long", [2**40, None]),
    "float": (pa.field("x", pa.float32()), "float", [1.5, None]),
    "double": (pa.field("x", pa.float64()), "double", [2.25, None]),
    "boolean": (pa.field("x", pa.bool_()), "boolean", [True, None]),
    "string": (pa.field("x", pa.string()), "string", ["é", None]),
    "bytes": (pa.field("x", pa.binary()), "bytes", [b"\x00\xff", None]),
    "decimal_fixed": (
        pa.field("x", pa.decimal128(10, 2)),
        {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{NS}.x",
            "size": 5,
            "logicalType": "decimal",
            "precision": 10,
            "scale": 2,
        },
        [decimal.Decimal("-12345678.91"), None],
    ),
    "decimal_bytes": (
        pa.field("x", pa.decimal128(20, 4), metadata=_meta(BYTES_DECIMAL)),
        BYTES_DECIMAL,
        [decimal.Decimal("1234567890123456.7891"), None],
    ),
    "date": (
        pa.field("x", pa.date32()),
        {"type": "int", "logicalType": "date"},
        [dt.date(1969, 12, 31), None],
    ),
    "timestamp_millis": (
        pa.field("x", pa.timestamp("ms", tz="UTC")),
        {"type": "long", "logicalType": "timestamp-millis"},
        [dt.datetime(2024, 2, 29, 23, 59, 59, 123000, tzinfo=UTC), None],
    ),
    "timestamp_micros": (
        pa.field("x", pa.timestamp("us", tz="UTC")),
        {"type": "long", "logicalType": "timestamp-micros"},
        [dt.datetime(1960, 1, 1, 0, 0, 0, 1, tzinfo=UTC), None],
    ),
    "local_timestamp_millis": (
        pa.field("x", pa.timestamp("ms")),
        {"type": "long", "logicalType": "local-timestamp-millis"},
        [dt.datetime(2024, 1, 1, 8, 30, 0, 5000), None],
    ),
    "local_timestamp_micros": (
        pa.field("x", pa.timestamp("us")),
        {"type": "long", "logicalType": "local-timestamp-micros"},
        [dt.datetime(2024, 1, 1, 8, 30, 0, 7), None],
    ),
    "time_millis": (
        pa.field("x", pa.time32("ms")),
        {"type": "int", "logicalType": "time-millis"},
        [dt.time(23, 59, 59, 999000), None],
    ),
    "time_micros": (
        pa.field("x", pa.time64("us")),
        {"type": "long", "logicalType": "time-micros"},
        [dt.time(0, 0, 0, 1), None],
    ),
    "uuid": (pa.field("x", pa.string(), metadata=_meta(UUID)), UUID, [str(uuid.UUID(int=7)), None]),
    "enum": (pa.field("x", pa.string(), metadata=_meta(ENUM)), ENUM, ["BLUE", None]),
    "fixed": (pa.field("x", pa.binary(4), metadata=_meta(FIXED)), FIXED, [b"abcd", None]),
    "nested_record": (
        pa.field("x", NESTED),
        {
            "type": "record",
            "name": "x",
            "namespace": NS,
            "fields": [
                {"name": "a", "type": ["null", "string"], "default": None},
                {
                    "name": "child",
                    "type": [
                        "null",
                        {
                            "type": "record",
                            "name": "child",
                            "namespace": f"{NS}.x",
                            "fields": [{"name": "c", "type": ["null", "double"], "default": None}],
                        },
                    ],
                    "default": None,
                },
            ],
        },
        [{"a": "s", "child": {"c": 1.5}}, {"a": None, "child": None}],
    ),
    "array_of_nullable_records": (
        pa.field("x", pa.list_(ARR_ITEM)),
        {
            "type": "array",
            "items": [
                "null",
                {
                    "type": "record",
                    "name": "x",
                    "namespace": NS,
                    "fields": [
                        {"name": "f1", "type": ["null", "string"], "default": None},
                        {"name": "f2", "type": ["null", "int"], "default": None},
                    ],
                },
            ],
        },
        [[{"f1": "a", "f2": 1}, None, {"f1": None, "f2": 2}], []],
    ),
    "map_of_nullable_records": (
        pa.field("x", pa.map_(pa.string(), MAP_VALUE)),
        {
            "type": "map",
            "values": [
                "null",
                {
                    "type": "record",
                    "name": "x",
                    "namespace": NS,
                    "fields": [
                        {"name": "v1", "type": ["null", "double"], "default": None},
                        {"name": "v2", "type": ["null", "boolean"], "default": None},
                    ],
                },
            ],
        },
        [[("k", {"v1": 0.5, "v2": True}), ("gone", None)], None],
    ),
    "array_of_maps": (
        pa.field("x", pa.list_(pa.map_(pa.string(), pa.int64()))),
        {"type": "array", "items": ["null", {"type": "map", "values": ["null", "long"]}]},
        [[[("a", 1), ("b", None)], None], None],
    ),
}


def _table(field: pa.Field, values: list[Any]) -> pa.Table:
    meta = [pa.field(name, pa.string()) for name in META_FIELDS]
    schema = pa.schema([*meta, field])
    rows = [
        {**{name: None for name in META_FIELDS}, RECORD_KEY: f"k{i}", field.name: value}
        for i, value in enumerate(values)
    ]
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.mark.parametrize("case", list(CASES))
def test_arrow_and_avro_types_map_both_ways(case: str) -> None:
    field, avro_type, _ = CASES[case]
    avro = avro_record_schema("t", pa.schema([field]), with_meta_fields=False)
    assert avro["fields"] == [{"name": "x", "type": ["null", avro_type], "default": None}]
    fastavro.parse_schema(avro)  # a valid schema: named types are unique
    back = arrow_schema_from_avro(avro)
    assert back.field("x").type == field.type
    assert avro_record_schema("t", back, with_meta_fields=False) == avro


@pytest.mark.parametrize("case", list(CASES))
def test_values_survive_an_avro_block(case: str) -> None:
    field, _, values = CASES[case]
    rows = _table(field, values)
    avro = avro_record_schema("t", rows.schema)
    (block,) = read_log_blocks(encode_avro_data_block("001", avro, table_to_avro_records(rows)))
    assert block.block_type is BlockType.AVRO_DATA
    # Read through the block's own schema (as a reader that knows nothing else does).
    got = block_records(block)
    assert got.column("x").to_pylist() == rows.column("x").to_pylist()
    assert got.column("x").type == field.type


@pytest.mark.parametrize("case", list(CASES))
def test_values_survive_a_parquet_block(case: str) -> None:
    field, _, values = CASES[case]
    rows = _table(field, values)
    avro = avro_record_schema("t", rows.schema)
    (block,) = read_log_blocks(encode_parquet_data_block("001", avro, rows))
    assert block.block_type is BlockType.PARQUET_DATA
    assert block.schema == avro
    got = block_records(block, arrow_schema_from_avro(avro))
    assert got.column("x").to_pylist() == rows.column("x").to_pylist()


# The shape of a real Hudi 0.x table schema (hudi-rs's v6 test tables): arrays and maps of
# nullable records, a nested record, a decimal in a fixed, date and timestamp.
HUDI_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "v6_nonpartitioned_record",
    "namespace": "hoodie.v6_nonpartitioned",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {
            "name": "decimalField",
            "type": [
                "null",
                {
                    "type": "fixed",
                    "name": "fixed",
                    "namespace": "hoodie.v6_nonpartitioned.v6_nonpartitioned_record.decimalField",
                    "size": 5,
                    "logicalType": "decimal",
                    "precision": 10,
                    "scale": 5,
                },
            ],
            "default": None,
        },
        {"name": "dateField", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {
            "name": "timestampField",
            "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
        },
        {
            "name": "arrayField",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": [
                        "null",
                        {
                            "type": "record",
                            "name": "array",
                            "namespace": "hoodie.v6_nonpartitioned.v6_nonpartitioned_record"
                            ".arrayField",
                            "fields": [
                                {"name": "arr_struct_f1", "type": ["null", "string"]},
                                {"name": "arr_struct_f2", "type": ["null", "int"]},
                            ],
                        },
                    ],
                },
            ],
        },
        {
            "name": "mapField",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": [
                        "null",
                        {
                            "type": "record",
                            "name": "value",
                            "fields": [
                                {"name": "map_field_value_struct_f1", "type": ["null", "double"]},
                                {"name": "map_field_value_struct_f2", "type": ["null", "boolean"]},
                            ],
                        },
                    ],
                },
            ],
        },
        {
            "name": "structField",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "structField",
                    "fields": [
                        {"name": "field1", "type": ["null", "string"]},
                        {
                            "name": "child_struct",
                            "type": [
                                "null",
                                {
                                    "type": "record",
                                    "name": "child_struct",
                                    "fields": [
                                        {"name": "child_field1", "type": ["null", "double"]}
                                    ],
                                },
                            ],
                        },
                    ],
                },
            ],
        },
    ],
}


def test_a_hudi_schema_with_nested_types_maps_to_arrow() -> None:
    schema = arrow_schema_from_avro(with_meta_fields(HUDI_SCHEMA))
    assert schema.names[: len(META_FIELDS)] == list(META_FIELDS)
    assert schema.field("id") == pa.field("id", pa.int32(), nullable=False)
    assert schema.field("decimalField").type == pa.decimal128(10, 5)
    assert schema.field("dateField").type == pa.date32()
    assert schema.field("timestampField").type == pa.timestamp("us", tz="UTC")
    assert schema.field("arrayField").type == pa.list_(
        pa.struct([("arr_struct_f1", pa.string()), ("arr_struct_f2", pa.int32())])
    )
    assert schema.field("mapField").type == pa.map_(
        pa.string(),
        pa.struct(
            [("map_field_value_struct_f1", pa.float64()), ("map_field_value_struct_f2", pa.bool_())]
        ),
    )
    assert schema.field("structField").type == pa.struct(
        [("field1", pa.string()), ("child_struct", pa.struct([("child_field1", pa.float64())]))]
    )
    # and records of it go through an Avro block and back
    record = {
        **{name: None for name in META_FIELDS},
        RECORD_KEY: "1",
        "id": 1,
        "name": "a",
        "decimalField": decimal.Decimal("1.00001"),
        "dateField": dt.date(2024, 1, 1),
        "timestampField": dt.datetime(2024, 1, 1, tzinfo=UTC),
        "arrayField": [{"arr_struct_f1": "x", "arr_struct_f2": 1}, None],
        "mapField": {"k": {"map_field_value_struct_f1": 1.0, "map_field_value_struct_f2": False}},
        "structField": {"field1": "f", "child_struct": {"child_field1": 2.0}},
    }
    (block,) = read_log_blocks(encode_avro_data_block("1", with_meta_fields(HUDI_SCHEMA), [record]))
    (got,) = block_records(block, schema).to_pylist()
    assert got == {**record, "mapField": list(record["mapField"].items())}  # type: ignore[attr-defined]


def test_a_union_of_two_types_is_refused_by_field_name() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int", "string"]}]}
    with pytest.raises(ValueError, match="'u'"):
        arrow_schema_from_avro(schema)


# Schema evolution between a slice's files -------------------------------------------------

OLD = pa.schema(
    [
        *(pa.field(name, pa.string()) for name in META_FIELDS),
        pa.field("ts", pa.int32()),
        pa.field("amount", pa.float32()),
        pa.field("info", pa.struct([("a", pa.string())])),
        pa.field("tags", pa.list_(pa.struct([("t", pa.int32())]))),
    ]
)
NEW = pa.schema(
    [
        *(pa.field(name, pa.string()) for name in META_FIELDS),
        pa.field("ts", pa.int64()),
        pa.field("amount", pa.float64()),
        pa.field("info", pa.struct([("a", pa.string()), ("b", pa.int64())])),
        pa.field("tags", pa.list_(pa.struct([("t", pa.int64()), ("u", pa.string())]))),
        pa.field("added", pa.string()),
    ]
)


def _rows(schema: pa.Schema, commit: str, keys: list[str], ts: int) -> pa.Table:
    wide = schema.get_field_index("added") >= 0
    rows = [
        {
            **{name: None for name in META_FIELDS},
            COMMIT_TIME: commit,
            RECORD_KEY: key,
            "ts": ts,
            "amount": ts + 0.5,
            "info": {"a": key, **({"b": ts} if wide else {})},
            "tags": [{"t": ts, **({"u": key} if wide else {})}],
            **({"added": f"{key}@{ts}"} if wide else {}),
        }
        for key in keys
    ]
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.mark.parametrize("log_format", ["avro", "parquet"])
@pytest.mark.parametrize("base_schema", ["old", "new"])
def test_a_slice_reads_across_added_columns_and_widened_types(
    tmp_path: Path, base_schema: str, log_format: str
) -> None:
    """Base and log files written under older and newer schemas merge into the table's
    schema: missing columns and nested fields are null, ints and floats widen."""
    storage = Storage(str(tmp_path))
    file_id, c1, c2, c3 = "f1-0", "20240101000000000", "20240102000000000", "20240103000000000"
    base_rows = _rows(OLD if base_schema == "old" else NEW, c1, ["a", "b", "c"], 1)
    base_name = BaseFileName(file_id, "0-0-0", c1)
    size = write_base_file(storage, str(base_name), base_rows)
    logs = []
    for version, (schema, commit, keys, ts) in enumerate(
        [(NEW, c2, ["a", "d"], 2), (OLD, c3, ["b"], 3)], start=1
    ):
        name = LogFileName(file_id, c1, version, "0-0-0")
        rows = _rows(schema, commit, keys, ts)
        log_size = write_data_log_file(
            storage,
            str(name),
            commit,
            avro_record_schema("t", rows.schema),
            rows,
            LogBlockFormat(log_format),
        )
        logs.append(LogFile(name, str(name), log_size))
    file_slice = FileSlice("", file_id, c1, BaseFile(base_name, str(base_name), size), tuple(logs))

    merged, log_records = read_file_slice(storage, file_slice, "ts", lambda _: True, NEW)

    assert log_records == 3
    assert merged.schema == NEW
    got = {row[RECORD_KEY]: row for row in merged.to_pylist()}
    expected = {
        row[RECORD_KEY]: row
        for row in _rows(NEW, "", ["a", "d"], 2).to_pylist()
        + [
            {**r, "added": None, "info": {**r["info"], "b": None}, "tags": [{"t": 3, "u": None}]}
            for r in _rows(NEW, "", ["b"], 3).to_pylist()
        ]
    }
    old_c = _rows(NEW, "", ["c"], 1).to_pylist()[0]
    if base_schema == "old":
        old_c = {
            **old_c,
            "added": None,
            "info": {"a": "c", "b": None},
            "tags": [{"t": 1, "u": None}],
        }
    expected["c"] = old_c
    for row in got.values():
        row.pop(COMMIT_TIME)
    for row in expected.values():
        row.pop(COMMIT_TIME)
    assert got == expected


def _batch(keys: list[str], ts: int, *, new: bool) -> pa.Table:
    fields = [
        pa.field("id", pa.string()),
        pa.field("ts", pa.int64() if new else pa.int32()),
        pa.field("amount", pa.float64() if new else pa.float32()),
        pa.field("info", pa.struct([("a", pa.string()), *([("b", pa.int64())] if new else [])])),
        *([pa.field("added", pa.string())] if new else []),
    ]
    rows = [
        {
            "id": key,
            "ts": ts,
            "amount": ts + 0.5,
            "info": {"a": key, "b": ts} if new else {"a": key},
            "added": f"{key}@{ts}",
        }
        for key in keys
    ]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def test_copy_on_write_upsert_with_an_evolved_schema_keeps_every_column(tmp_path: Path) -> None:
    """A batch with a widened type and an added column rewrites base files in its schema:
    old records get nulls for what they lack, hudi-rs reads the evolved table."""
    base = str(tmp_path / "cow")
    table = create_table(
        base, "cow", table_type=COPY_ON_WRITE, record_key_fields=["id"], ordering_field="ts"
    )
    writer = HudiWriter(table)
    writer.insert(_batch(["a", "b", "c"], 1, new=False))
    writer.upsert(_batch(["b", "d"], 2**33, new=True))

    got = {row["id"]: row for row in oracle.snapshot(base).to_pylist()}
    old = {"ts": 1, "amount": 1.5, "added": None}
    assert got == {
        "a": {RECORD_KEY: "a", "id": "a", **old, "info": {"a": "a", "b": None}},
        "b": {
            RECORD_KEY: "b",
            "id": "b",
            "ts": 2**33,
            "amount": 2**33 + 0.5,
            "info": {"a": "b", "b": 2**33},
            "added": f"b@{2**33}",
        },
        "c": {RECORD_KEY: "c", "id": "c", **old, "info": {"a": "c", "b": None}},
        "d": {
            RECORD_KEY: "d",
            "id": "d",
            "ts": 2**33,
            "amount": 2**33 + 0.5,
            "info": {"a": "d", "b": 2**33},
            "added": f"d@{2**33}",
        },
    }


# Tables written by Hudi itself -------------------------------------------------------------

FIXTURES = HUDI_TABLES


def _unzipped(name: str, tmp_path: Path) -> Path:
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as archive:
        archive.extractall(tmp_path)
    (root,) = [p for p in tmp_path.iterdir() if (p / ".hoodie").is_dir()]
    return root


@pytest.mark.parametrize(
    "fixture",
    ["cow_v8_nonpartitioned", "cow_v9_txns_simple_nometa", "mor_avro_v9_txns_simple_nometa"],
)
def test_schemas_in_hudi_written_files_map_to_arrow_and_back_exactly(
    fixture: str, tmp_path: Path
) -> None:
    """Hudi records each base file's Avro schema in its footer: we map it to the file's own
    Arrow types, and spell it back exactly as Hudi did (record names, namespaces, defaults)."""
    root = _unzipped(fixture, tmp_path)
    # Files of Hudi's Spark row writer carry Spark's schema instead; the others carry Avro's.
    footers = {
        path: (pq.read_schema(path).metadata or {}).get(b"parquet.avro.schema")
        for path in root.rglob("*.parquet")
        if ".hoodie" not in path.parts
    }
    files = {path: text for path, text in footers.items() if text is not None}
    assert files
    for path, text in files.items():
        avro = json.loads(text)
        schema = arrow_schema_from_avro(avro)
        table_name = avro["namespace"].removeprefix("hoodie.")
        assert avro_record_schema(table_name, schema) == avro
        rows = pq.read_table(path)
        # Hudi's two-level lists cannot hold null items; otherwise the types are the file's.
        read = conform_table(rows, schema)
        assert read.schema == schema
        assert read.to_pylist() == rows.to_pylist()


def test_hudi_written_avro_log_blocks_read_in_their_own_schema(tmp_path: Path) -> None:
    root = _unzipped("mor_avro_v9_txns_simple_nometa", tmp_path)
    logs = [p for p in root.rglob(".*.log.*") if ".hoodie" not in p.parts]
    assert logs
    seen = 0
    for path in logs:
        for block in read_log_blocks(path.read_bytes()):
            if block.block_type is BlockType.AVRO_DATA:
                assert block.schema is not None
                rows = block_records(block)
                assert rows.schema == arrow_schema_from_avro(block.schema)
                assert all(rows.column(RECORD_KEY).to_pylist())
                seen += rows.num_rows
    assert seen > 0
