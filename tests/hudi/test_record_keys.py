"""Record keys and partition paths computed from data fields, checked against Hudi's rules.

Expected strings follow the Java code named in each test (`KeyGenUtils`, `KeyGenerator.
constructRecordKey`, `CustomAvroKeyGenerator`, `HoodieAvroUtils.convertValueForSpecificDataTypes`).
"""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.properties import TableConfig
from tms.hudi.record_keys import (
    KeyGeneration,
    KeyGeneratorKind,
    escape_path_name,
    key_generation,
    key_generation_refusals,
)

_KEYGEN = "org.apache.hudi.keygen."


def _config(**props: str) -> TableConfig:
    return TableConfig({"hoodie.table.version": "9", "hoodie.table.initial.version": "9", **props})


def test_simple_key_is_the_value_and_partition_is_the_value() -> None:
    keys = KeyGeneration(KeyGeneratorKind.SIMPLE, ("id",), ("region",))
    rows = pa.table({"id": [7, 12], "region": ["eu", None]})
    assert keys.record_keys(rows).to_pylist() == ["7", "12"]
    assert keys.partition_paths(rows).to_pylist() == ["eu", "__HIVE_DEFAULT_PARTITION__"]


def test_simple_key_refuses_a_null_or_empty_value() -> None:
    keys = KeyGeneration(KeyGeneratorKind.SIMPLE, ("id",), ())
    with pytest.raises(ValueError, match="'id'"):
        keys.record_keys(pa.table({"id": ["a", ""]}))
    with pytest.raises(ValueError, match="'id'"):
        keys.record_keys(pa.table({"id": ["a", None]}))


def test_complex_key_pairs_fields_and_values_with_placeholders() -> None:
    keys = KeyGeneration(KeyGeneratorKind.COMPLEX, ("id", "name"), ("year", "month"))
    rows = pa.table(
        {
            "id": [1, None, 3],
            "name": ["a", "b", ""],
            "year": [2024, 2025, None],
            "month": ["01", "", "03"],
        }
    )
    assert keys.record_keys(rows).to_pylist() == [
        "id:1,name:a",
        "id:__null__,name:b",
        "id:3,name:__empty__",
    ]
    assert keys.partition_paths(rows).to_pylist() == [
        "2024/01",
        "2025/__HIVE_DEFAULT_PARTITION__",
        "__HIVE_DEFAULT_PARTITION__/03",
    ]


def test_complex_key_refuses_a_row_whose_key_fields_are_all_blank() -> None:
    keys = KeyGeneration(KeyGeneratorKind.COMPLEX, ("id", "name"), ())
    with pytest.raises(ValueError, match="all null or empty"):
        keys.record_keys(pa.table({"id": [1, None], "name": ["a", ""]}))


def test_hive_style_and_url_encoded_partition_paths() -> None:
    keys = KeyGeneration(
        KeyGeneratorKind.COMPLEX, ("id", "k"), ("day", "city"), hive_style=True, url_encode=True
    )
    rows = pa.table(
        {
            "id": [1, 2],
            "k": ["x", "y"],
            "day": ["2024/01/02", None],
            "city": ["São Paulo", "a:b=c%"],
        }
    )
    assert keys.partition_paths(rows).to_pylist() == [
        "day=2024%2F01%2F02/city=São Paulo",
        "day=__HIVE_DEFAULT_PARTITION__/city=a%3Ab%3Dc%25",
    ]


def test_escape_path_name_escapes_hive_unsafe_characters_only() -> None:
    assert escape_path_name("a b-c_d.e") == "a b-c_d.e"
    assert escape_path_name("\"#%'*/:=?\\\x7f{[]^\x01\n") == (
        "%22%23%25%27%2A%2F%3A%3D%3F%5C%7F%7B%5B%5D%5E%01%0A"
    )


def test_non_partitioned_keys_and_empty_partition_path() -> None:
    config = _config(
        **{
            "hoodie.table.recordkey.fields": "id,seq",
            "hoodie.table.keygenerator.class": _KEYGEN + "NonpartitionedKeyGenerator",
        }
    )
    keys = key_generation(config)
    rows = pa.table({"id": ["u1"], "seq": [3]})
    assert keys.record_keys(rows).to_pylist() == ["id:u1,seq:3"]
    assert keys.partition_paths(rows).to_pylist() == [""]
    single = KeyGeneration(KeyGeneratorKind.NON_PARTITION, ("id",), ())
    assert single.record_keys(rows).to_pylist() == ["u1"]


def test_key_generation_follows_the_table_properties() -> None:
    config = _config(
        **{
            "hoodie.table.recordkey.fields": "id",
            "hoodie.table.partition.fields": "region",
            "hoodie.table.keygenerator.type": "SIMPLE",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.partitionpath.urlencode": "true",
        }
    )
    assert key_generation(config) == KeyGeneration(
        KeyGeneratorKind.SIMPLE, ("id",), ("region",), hive_style=True, url_encode=True
    )
    inferred = _config(
        **{"hoodie.table.recordkey.fields": "a,b", "hoodie.table.partition.fields": "p"}
    )
    assert key_generation(inferred).kind is KeyGeneratorKind.COMPLEX


@pytest.mark.parametrize(
    ("props", "kind"),
    [
        ({"hoodie.table.keygenerator.type": "SIMPLE_AVRO"}, KeyGeneratorKind.SIMPLE),
        ({"hoodie.table.keygenerator.type": "TIMESTAMP_AVRO"}, KeyGeneratorKind.TIMESTAMP),
        ({"hoodie.table.keygenerator.type": "CUSTOM"}, KeyGeneratorKind.CUSTOM),
        (
            {"hoodie.table.keygenerator.class": _KEYGEN + "TimestampBasedAvroKeyGenerator"},
            KeyGeneratorKind.TIMESTAMP,
        ),
        (
            {"hoodie.table.keygenerator.class": _KEYGEN + "CustomAvroKeyGenerator"},
            KeyGeneratorKind.CUSTOM,
        ),
        # KeyGenUtils.inferKeyGeneratorType: a typed first partition field means custom
        ({"hoodie.table.partition.fields": "p:simple"}, KeyGeneratorKind.CUSTOM),
    ],
)
def test_key_generator_types_and_classes_name_the_kind(
    props: dict[str, str], kind: KeyGeneratorKind
) -> None:
    config = _config(
        **{"hoodie.table.recordkey.fields": "id", "hoodie.table.partition.fields": "p", **props}
    )
    assert key_generation(config).kind is kind


@pytest.mark.parametrize(
    ("props", "reason"),
    [
        (
            {"hoodie.table.keygenerator.class": "com.example.MyKeyGen"},
            "com.example.MyKeyGen is not handled",
        ),
        (
            {"hoodie.table.keygenerator.type": "USER_PROVIDED"},
            "USER_PROVIDED is not handled",
        ),
        (
            {"hoodie.table.keygenerator.type": "TIMESTAMP", "hoodie.table.recordkey.fields": "a,b"},
            "TIMESTAMP key generator with record key fields ['a', 'b']: needs exactly one",
        ),
        (
            {"hoodie.table.keygenerator.type": "COMPLEX", "hoodie.table.version": "6"},
            "COMPLEX key generator with a single record key field",
        ),
        (
            {"hoodie.table.keygenerator.type": "COMPLEX", "hoodie.table.initial.version": "8"},
            "COMPLEX key generator with a single record key field",
        ),
        (
            {"hoodie.table.keygenerator.type": "SIMPLE", "hoodie.table.recordkey.fields": ""},
            "no record key fields",
        ),
    ],
)
def test_record_keys_that_cannot_be_computed_are_refused_with_the_reason(
    props: dict[str, str], reason: str
) -> None:
    config = _config(
        **{"hoodie.table.recordkey.fields": "id", "hoodie.table.partition.fields": "p", **props}
    )
    assert any(reason in r for r in key_generation_refusals(config))
    with pytest.raises(UnsupportedTableError, match=reason.split()[0]):
        key_generation(config)


def test_complex_single_field_key_of_a_table_created_at_version_9_is_field_prefixed() -> None:
    """`KeyGenUtils.encodeSingleKeyFieldNameForComplexKeyGen`: true at write table version 9,
    and only Hudi 1.1+ writes a table created at version 9."""
    config = _config(
        **{
            "hoodie.table.recordkey.fields": "id",
            "hoodie.table.partition.fields": "p",
            "hoodie.table.keygenerator.type": "COMPLEX",
        }
    )
    assert key_generation_refusals(config) == []
    keys = key_generation(config)
    rows = pa.table({"id": [7, None], "p": ["a", "b"]})
    assert keys.record_keys(rows.slice(0, 1)).to_pylist() == ["id:7"]
    with pytest.raises(ValueError, match="all null or empty"):
        keys.record_keys(rows)


def test_custom_key_generator_keys_like_simple_or_complex_and_types_each_partition_part() -> None:
    """`CustomAvroKeyGenerator`: one record key field keys like `SimpleAvroKeyGenerator`, more
    like `ComplexAvroKeyGenerator`; each `field:type` partition part by its type, joined by /."""
    props = {
        "hoodie.table.keygenerator.type": "CUSTOM",
        "hoodie.table.partition.fields": "region:simple,ts:TIMESTAMP",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        "hoodie.keygen.timebased.output.timezone": "UTC",
        "hoodie.datasource.write.hive_style_partitioning": "true",
    }
    rows = pa.table(
        {
            "id": [1, 2],
            "name": ["a", "b"],
            "region": ["eu", None],
            "ts": pa.array([1_700_000_000_000, None], pa.int64()),
        }
    )
    single = key_generation(_config(**props, **{"hoodie.table.recordkey.fields": "id"}))
    assert single.record_keys(rows).to_pylist() == ["1", "2"]
    both = key_generation(_config(**props, **{"hoodie.table.recordkey.fields": "id,name"}))
    assert both.record_keys(rows).to_pylist() == ["id:1,name:a", "id:2,name:b"]
    # a null simple part is the default partition; a null timestamp part is the instant 1 ms
    assert single.partition_paths(rows).to_pylist() == [
        "region=eu/ts=2023/11/14",
        "region=__HIVE_DEFAULT_PARTITION__/ts=1970/01/01",
    ]


def test_custom_key_generator_without_partition_fields_is_non_partitioned() -> None:
    config = _config(
        **{"hoodie.table.recordkey.fields": "id", "hoodie.table.keygenerator.type": "CUSTOM"}
    )
    keys = key_generation(config)
    assert keys.partition_paths(pa.table({"id": [1]})).to_pylist() == [""]


@pytest.mark.parametrize(
    ("partition_fields", "reason"),
    [
        # table version 6 (and Hudi 0.x) keeps only the names (SparkKeyGenUtils.getPartitionColumns)
        ("region,ts", "partition field 'region' in hoodie.table.partition.fields has no type"),
        ("region:simple,ts:hourly", "partition field 'ts:hourly' has unknown type 'hourly'"),
        ("ts:timestamp", "hoodie.keygen.timebased.timestamp.type is not in hoodie.properties"),
    ],
)
def test_custom_partition_paths_that_are_not_determined_are_refused_but_keys_are_computed(
    partition_fields: str, reason: str
) -> None:
    """Merging needs only record keys, so the table stays serviceable; writing new records,
    which needs the partition path, is refused with the reason."""
    config = _config(
        **{
            "hoodie.table.version": "6",
            "hoodie.table.recordkey.fields": "id",
            "hoodie.table.keygenerator.class": _KEYGEN + "CustomKeyGenerator",
            "hoodie.table.partition.fields": partition_fields,
        }
    )
    assert key_generation_refusals(config) == []
    keys = key_generation(config)
    rows = pa.table({"id": [5], "region": ["eu"], "ts": pa.array([1], pa.int64())})
    assert keys.record_keys(rows).to_pylist() == ["5"]
    assert keys.partition_refusal is not None and reason in keys.partition_refusal
    with pytest.raises(UnsupportedTableError, match="CustomKeyGenerator"):
        keys.partition_paths(rows)


def test_simple_key_generator_with_several_partition_fields_refuses_partition_paths() -> None:
    config = _config(
        **{
            "hoodie.table.recordkey.fields": "id",
            "hoodie.table.partition.fields": "a,b",
            "hoodie.table.keygenerator.type": "SIMPLE",
        }
    )
    keys = key_generation(config)
    with pytest.raises(UnsupportedTableError, match="SIMPLE key generator with partition fields"):
        keys.partition_paths(pa.table({"id": [1], "a": [1], "b": [2]}))


def test_dates_key_as_local_date_to_string() -> None:
    """`LocalDate.toString()` (`convertValueForSpecificDataTypes` makes a date a LocalDate):
    years zero-padded to four digits, `+` past 9999, `-` before year 0."""
    keys = KeyGeneration(KeyGeneratorKind.SIMPLE, ("day",), ("day",))
    days = [datetime.date(2024, 1, 5), datetime.date(5, 12, 31)]
    epoch_days = [(d - datetime.date(1970, 1, 1)).days for d in days]
    far = [2_932_897, -720_000]  # 10000-01-01 and -0002-09-16 (proleptic Gregorian, as numpy)
    rows = pa.table({"day": pa.array([*epoch_days, *far, None], pa.int32()).cast(pa.date32())})
    assert keys.partition_paths(rows).to_pylist() == [
        "2024-01-05",
        "0005-12-31",
        "+10000-01-01",
        "-0002-09-16",
        "__HIVE_DEFAULT_PARTITION__",
    ]
    assert keys.record_keys(rows.slice(0, 2)).to_pylist() == ["2024-01-05", "0005-12-31"]


def test_decimals_key_as_big_decimal_to_string() -> None:
    """`BigDecimal.toString()` at the column's scale: plain unless the adjusted exponent is
    below -6 (`1E-8`, `0E-8`)."""
    keys = KeyGeneration(KeyGeneratorKind.COMPLEX, ("amount", "id"), ())
    amounts = [Decimal("12.5"), Decimal("-0.1"), Decimal("0"), Decimal("1E-8"), Decimal("1E9")]
    rows = pa.table(
        {"amount": pa.array(amounts, pa.decimal128(20, 8)), "id": list(range(len(amounts)))}
    )
    assert keys.record_keys(rows).to_pylist() == [
        "amount:12.50000000,id:0",
        "amount:-0.10000000,id:1",
        "amount:0E-8,id:2",
        "amount:1E-8,id:3",
        "amount:1000000000.00000000,id:4",
    ]
    small = pa.table({"amount": pa.array([Decimal("7")], pa.decimal128(5, 0)), "id": [0]})
    assert keys.record_keys(small).to_pylist() == ["amount:7,id:0"]


@pytest.mark.parametrize(
    "kind",
    [pa.float64(), pa.float32(), pa.timestamp("us", tz="UTC"), pa.binary(), pa.list_(pa.int32())],
)
def test_unhandled_key_field_types_are_refused(kind: pa.DataType) -> None:
    keys = KeyGeneration(KeyGeneratorKind.SIMPLE, ("k",), ())
    with pytest.raises(UnsupportedTableError, match="'k' has type"):
        keys.check_field_types(pa.schema([("k", kind)]))
    with pytest.raises(UnsupportedTableError, match="'k' has type"):
        keys.record_keys(pa.table({"k": pa.nulls(1, kind)}))


def test_only_record_key_fields_are_checked_before_merging() -> None:
    """Merging matches record keys; a partition field's type does not matter to it."""
    keys = KeyGeneration(KeyGeneratorKind.COMPLEX, ("id", "name"), ("score",))
    keys.check_field_types(
        pa.schema([("id", pa.int64()), ("name", pa.date32()), ("score", pa.float64())])
    )
    with pytest.raises(UnsupportedTableError, match="'name' is not in the table schema"):
        keys.check_field_types(pa.schema([("id", pa.int64()), ("score", pa.float64())]))
    with pytest.raises(UnsupportedTableError, match="'score' has type double"):
        keys.partition_paths(pa.table({"id": [1], "name": ["a"], "score": [1.5]}))
