"""Column stats of each column type, from footers of Parquet files written here, as Hudi would
write them: the wrapper, the value, the value type, the Java order of merged ranges; and the
payloads encode with the schema Hudi 1.1 wrote into a real metadata table."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.hudi.test_fixture_views import unzip_fixture

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.hfile import HFileReader
from tms.hudi.metadata.column_stats import (
    ColumnRange,
    column_stats_entries,
    deletion_entries,
    range_from_payload,
    ranges_from_footer,
)
from tms.hudi.metadata.index_defs import IndexVersion
from tms.hudi.metadata.partition_stats import (
    column_types,
    partition_deletion_entries,
    partition_stats_entries,
)
from tms.hudi.metadata.schema import parsed_schema
from tms.hudi.metadata.stats_keys import column_stats_key, partition_stats_key, xxhash64
from tms.hudi.metadata.stats_values import ValueType, decimal_to_unscaled_bytes

NS = "org.apache.hudi.avro.model."
V1, V2 = IndexVersion.V1, IndexVersion.V2


def footer_of(table: pa.Table, tmp_path: Path, **options: Any) -> Any:
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **options)
    return pq.ParquetFile(path).metadata


def stats_of(table: pa.Table, tmp_path: Path, version: IndexVersion, **options: Any) -> dict:
    footer = footer_of(table, tmp_path, **options)
    entries = column_stats_entries("p=1", "f.parquet", footer, table.column_names, version)
    return {payload["columnName"]: payload for _, payload in entries}


def minmax(payload: dict) -> tuple[Any, Any, Any]:
    info = payload["valueType"]
    kind = None if info is None else (info["typeOrdinal"], info["additionalInfo"])
    return payload["minValue"], payload["maxValue"], kind


def test_v2_wrappers_and_value_types_of_each_primitive_and_logical_type(tmp_path: Path) -> None:
    table = pa.table(
        {
            "i": pa.array([3, -7, None], pa.int32()),
            "l": pa.array([2**40, -1, 5], pa.int64()),
            "f": pa.array([1.5, -2.25, 0.0], pa.float32()),
            "d": pa.array([1e300, -0.5, 2.0], pa.float64()),
            "b": pa.array([True, False, None]),
            "s": pa.array(["pear", "apple", "zoé"]),
            "bin": pa.array([b"\x01\x02", b"\xff", b"\x00"], pa.binary()),
            "fix": pa.array([b"ab", b"zz", b"a\x00"], pa.binary(2)),
            "dec": pa.array(
                [Decimal("12.50"), Decimal("-0.01"), Decimal("0.00")], pa.decimal128(9, 2)
            ),
            "day": pa.array([dt.date(2024, 1, 15), dt.date(1969, 12, 31), None]),
            "ts": pa.array([1_700_000_000_000_001, 5, 6], pa.timestamp("us", tz="UTC")),
            "ts_ms": pa.array([1_700_000_000_000, 5, 6], pa.timestamp("ms", tz="UTC")),
            "local": pa.array([1_700_000_000_000_001, 5, 6], pa.timestamp("us")),
            "t_ms": pa.array([1000, 2, 3], pa.time32("ms")),
            "t_us": pa.array([10**6, 2, 3], pa.time64("us")),
        }
    )
    got = {name: minmax(p) for name, p in stats_of(table, tmp_path, V2).items()}
    assert got == {
        "i": ((NS + "IntWrapper", {"value": -7}), (NS + "IntWrapper", {"value": 3}), (3, None)),
        "l": (
            (NS + "LongWrapper", {"value": -1}),
            (NS + "LongWrapper", {"value": 2**40}),
            (4, None),
        ),
        "f": (
            (NS + "FloatWrapper", {"value": -2.25}),
            (NS + "FloatWrapper", {"value": 1.5}),
            (5, None),
        ),
        "d": (
            (NS + "DoubleWrapper", {"value": -0.5}),
            (NS + "DoubleWrapper", {"value": 1e300}),
            (6, None),
        ),
        "b": (
            (NS + "BooleanWrapper", {"value": False}),
            (NS + "BooleanWrapper", {"value": True}),
            (2, None),
        ),
        "s": (
            (NS + "StringWrapper", {"value": "apple"}),
            (NS + "StringWrapper", {"value": "zoé"}),
            (7, None),
        ),
        "bin": (
            (NS + "BytesWrapper", {"value": b"\x00"}),
            (NS + "BytesWrapper", {"value": b"\xff"}),
            (8, None),
        ),
        "fix": (
            (NS + "BytesWrapper", {"value": b"a\x00"}),
            (NS + "BytesWrapper", {"value": b"zz"}),
            (9, None),
        ),
        "dec": (
            (NS + "BytesWrapper", {"value": b"\xff"}),  # -1 unscaled: BigInteger.toByteArray
            (NS + "BytesWrapper", {"value": b"\x04\xe2"}),  # 1250
            (10, "9,2"),
        ),
        "day": (
            (NS + "IntWrapper", {"value": -1}),
            (NS + "IntWrapper", {"value": 19737}),
            (12, None),
        ),
        "ts": (
            (NS + "LongWrapper", {"value": 5}),
            (NS + "LongWrapper", {"value": 1_700_000_000_000_001}),
            (16, None),
        ),
        "ts_ms": (
            (NS + "LongWrapper", {"value": 5}),
            (NS + "LongWrapper", {"value": 1_700_000_000_000}),
            (15, None),
        ),
        "local": (
            (NS + "LongWrapper", {"value": 5}),
            (NS + "LongWrapper", {"value": 1_700_000_000_000_001}),
            (19, None),
        ),
        "t_ms": (
            (NS + "IntWrapper", {"value": 2}),
            (NS + "IntWrapper", {"value": 1000}),
            (13, None),
        ),
        "t_us": (
            (NS + "LongWrapper", {"value": 2}),
            (NS + "LongWrapper", {"value": 10**6}),
            (14, None),
        ),
    }


def test_v1_picks_the_wrapper_by_java_type_and_writes_no_value_type(tmp_path: Path) -> None:
    table = pa.table(
        {
            "dec": pa.array([Decimal("12.50"), Decimal("-0.01")], pa.decimal128(9, 2)),
            "day": pa.array([dt.date(2024, 1, 15), dt.date(2024, 1, 14)]),
            "s": pa.array(["b", "a"]),
            "ts": pa.array([7, 5], pa.timestamp("us", tz="UTC")),
            "bin": pa.array([b"\x02", b"\x01"]),
        }
    )
    got = {name: minmax(p) for name, p in stats_of(table, tmp_path, V1).items()}
    assert got == {
        "dec": (
            # decimal(30, 15) on the wire: the unscaled value at scale 15
            (NS + "DecimalWrapper", {"value": (-(10**13)).to_bytes(6, "big", signed=True)}),
            (NS + "DecimalWrapper", {"value": (125 * 10**14).to_bytes(7, "big", signed=True)}),
            None,
        ),
        "day": (
            (NS + "DateWrapper", {"value": 19736}),
            (NS + "DateWrapper", {"value": 19737}),
            None,
        ),
        "s": ((NS + "StringWrapper", {"value": "a"}), (NS + "StringWrapper", {"value": "b"}), None),
        "ts": ((NS + "LongWrapper", {"value": 5}), (NS + "LongWrapper", {"value": 7}), None),
        "bin": (
            (NS + "BytesWrapper", {"value": b"\x01"}),
            (NS + "BytesWrapper", {"value": b"\x02"}),
            None,
        ),
    }


def test_counts_sizes_nulls_and_row_groups_merge(tmp_path: Path) -> None:
    table = pa.table(
        {
            "x": pa.array([5, None, 1, 9, None, 4], pa.int64()),
            "n": pa.array([None] * 6, pa.string()),
        }
    )
    footer = footer_of(table, tmp_path, row_group_size=2)
    assert footer.num_row_groups == 3
    (x, n) = ranges_from_footer("f.parquet", footer, ["x", "n"], V2)
    chunks = [footer.row_group(i).column(0) for i in range(3)]
    assert (x.min_value, x.max_value, x.null_count, x.value_count) == (1, 9, 2, 6)
    assert x.total_size == sum(c.total_compressed_size for c in chunks)
    assert x.total_uncompressed_size == sum(c.total_uncompressed_size for c in chunks)
    assert (n.min_value, n.max_value, n.null_count, n.value_count) == (None, None, 6, 6)
    assert n.payload()["minValue"] is None and n.payload()["isTightBound"] is False


def test_only_listed_columns_and_leaf_paths_of_nested_fields(tmp_path: Path) -> None:
    table = pa.table(
        {
            "a": pa.array([1, 2]),
            "rec": pa.array([{"x": 1, "y": "q"}, {"x": 3, "y": "r"}]),
            "arr": pa.array([[1, 2], [3]]),
        }
    )
    footer = footer_of(table, tmp_path)
    got = ranges_from_footer("f.parquet", footer, ["rec.x", "arr", "missing", "a"], V2)
    assert [(r.column_name, r.min_value, r.max_value) for r in got] == [
        ("rec.x", 1, 3),
        ("a", 1, 2),
    ]


@pytest.mark.parametrize(
    ("array", "version"),
    [
        (pa.array([1, 2], pa.int8()), V2),  # INT(8) annotation: Hudi drops the file's stats
        (pa.array([b"ab", b"cd"], pa.binary(2)), V1),  # FIXED without decimal: Hudi fails
    ],
)
def test_types_hudi_cannot_write_are_refused(
    array: pa.Array, version: IndexVersion, tmp_path: Path
) -> None:
    footer = footer_of(pa.table({"c": array}), tmp_path)
    with pytest.raises(UnsupportedTableError, match="'c'"):
        ranges_from_footer("f.parquet", footer, ["c"], version)


def test_deletion_entries_are_stubs_under_the_files_keys() -> None:
    ((key, payload),) = deletion_entries("p=1", "f.parquet", ["c"], V2)
    assert key == column_stats_key("p=1", "f.parquet", "c")
    assert payload == {
        "fileName": "f.parquet",
        "columnName": "c",
        "minValue": None,
        "maxValue": None,
        "valueCount": -1,
        "nullCount": -1,
        "totalSize": -1,
        "totalUncompressedSize": -1,
        "isDeleted": True,
        "isTightBound": False,
        "valueType": {"typeOrdinal": 1, "additionalInfo": None},
    }
    ((_, v1),) = deletion_entries("p=1", "f.parquet", ["c"], V1)
    assert v1["valueType"] is None and v1["isDeleted"] is True
    ((pkey, partition),) = partition_deletion_entries("p=1", ["c"], V2)
    assert pkey == partition_stats_key("p=1", "c")
    assert partition["fileName"] == "" and partition["isDeleted"] and partition["isTightBound"]


def _range(name: str, low: Any, high: Any, kind: ValueType, **extra: Any) -> ColumnRange:
    return ColumnRange(name, "c", low, high, 1, 3, 10, 20, kind, **extra)


def test_partition_ranges_merge_in_java_order() -> None:
    """Strings by UTF-16 code unit (U+1F600 sorts before U+FFFF), bytes signed (0x80 before
    0x01), -0.0 before 0.0; counts and sizes add up."""
    cases = [
        (ValueType.STRING, ("\uffff", "\U0001f600"), "\U0001f600", "\uffff"),
        (ValueType.BYTES, (b"\x01", b"\x80"), b"\x80", b"\x01"),
        (ValueType.DOUBLE, (0.0, -0.0), -0.0, 0.0),
    ]
    for kind, (first, second), low, high in cases:
        ranges = [_range("a", first, first, kind), _range("b", second, second, kind)]
        types = {"c": (kind, 0, 0)}
        ((_, payload),) = partition_stats_entries("p=1", ranges, types)
        assert payload["minValue"][1]["value"] == low and repr(
            payload["minValue"][1]["value"]
        ) == repr(low)
        assert payload["maxValue"][1]["value"] == high
        assert (payload["valueCount"], payload["nullCount"]) == (6, 2)
        assert (payload["totalSize"], payload["totalUncompressedSize"]) == (20, 40)
        assert payload["fileName"] == "p=1" and payload["isTightBound"] is True


def test_partition_stats_take_the_table_schemas_type() -> None:
    """A file written when the column was an int merges into the long the schema has now."""
    schema = {"type": "record", "name": "r", "fields": [{"name": "c", "type": ["null", "long"]}]}
    types = column_types(schema, ["c", "_hoodie_commit_time"])
    assert types == {"c": (ValueType.LONG, 0, 0), "_hoodie_commit_time": (ValueType.STRING, 0, 0)}
    ranges = [_range("a", 1, 2, ValueType.INT), _range("b", 2**40, 2**40, ValueType.LONG)]
    ((_, payload),) = partition_stats_entries("p=1", ranges, types)
    assert payload["minValue"] == (NS + "LongWrapper", {"value": 1})
    assert payload["valueType"] == {"typeOrdinal": 4, "additionalInfo": None}


def test_decimal_unscaled_bytes_are_javas_biginteger_bytes() -> None:
    assert decimal_to_unscaled_bytes(Decimal("0.00"), 2) == b"\x00"
    assert decimal_to_unscaled_bytes(Decimal("1.28"), 2) == b"\x00\x80"
    assert decimal_to_unscaled_bytes(Decimal("-1.28"), 2) == b"\x80"
    assert decimal_to_unscaled_bytes(Decimal("-1.29"), 2) == b"\xff\x7f"
    assert decimal_to_unscaled_bytes(Decimal("1250.00"), 2) == b"\x01\xe8\x48"


def test_keys_are_hudis() -> None:
    """The seed is Java's int 0xdabadaba widened to a long (sign-extended)."""
    assert xxhash64(b"abc", 0) == 0x44BC2CF5AD770999
    key = column_stats_key(
        "region=us",
        "c7bbe63e-fa43-40ba-94a9-03158165edc6-0_1-27-53_20260307162434124.parquet",
        "currency",
    )
    assert key == "/m6lxu4Dh5w=431THTTwO5Q=W7RhzS2IFnrW7FlqIkFJUw=="
    assert partition_stats_key("region=us", "currency") == key[:24]
    assert partition_stats_key("", "c") == partition_stats_key(".", "c")


@pytest.fixture(scope="module")
def hudi_column_stats_schema(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`HoodieMetadataColumnStats` as Hudi 1.1 wrote it into a fixture's base HFile, parsed
    as tms encodes metadata records: raw, logical types left out, so a decimal is its bytes."""
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path_factory.mktemp("cow"))
    hfile = next((root / ".hoodie" / "metadata" / "column_stats").glob("*.hfile"))
    record = json.loads(HFileReader(hfile).file_info[b"schema"])
    (stats,) = [f for f in record["fields"] if f["name"] == "ColumnStatsMetadata"]
    column_stats = {**stats["type"][1], "namespace": record["namespace"]}  # inherited there
    return parsed_schema(json.dumps(column_stats))


def test_payloads_encode_with_hudis_schema_and_read_back(
    tmp_path: Path, hudi_column_stats_schema: Any
) -> None:
    table = pa.table(
        {
            "dec": pa.array([Decimal("12.50"), Decimal("-0.01")], pa.decimal128(9, 2)),
            "s": pa.array(["b", None]),
            "day": pa.array([dt.date(2024, 1, 15), dt.date(2024, 1, 14)]),
        }
    )
    footer = footer_of(table, tmp_path)
    payloads = [
        p for _, p in column_stats_entries("p", "f.parquet", footer, table.column_names, V2)
    ]
    payloads += [
        p for _, p in column_stats_entries("p", "f.parquet", footer, table.column_names, V1)
    ]
    payloads += [p for _, p in deletion_entries("p", "f.parquet", ["s"], V2)]
    for payload in payloads:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, hudi_column_stats_schema, payload)
        buffer.seek(0)
        back = fastavro.schemaless_reader(
            buffer,
            hudi_column_stats_schema,
            None,
            return_record_name=True,
            return_record_name_override=True,
        )
        assert back == payload
        if payload["isDeleted"] is False:
            assert range_from_payload(back).payload() == payload
