"""Record keys and partition paths computed from data fields, checked against Hudi's rules."""

from __future__ import annotations

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
    return TableConfig({"hoodie.table.version": "9", **props})


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
            "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
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
    ("props", "reason"),
    [
        (
            {"hoodie.table.keygenerator.class": _KEYGEN + "TimestampBasedKeyGenerator"},
            "TimestampBasedKeyGenerator is not handled",
        ),
        ({"hoodie.table.keygenerator.type": "CUSTOM"}, "key generator CUSTOM is not handled"),
        (
            {"hoodie.table.keygenerator.class": "com.example.MyKeyGen"},
            "com.example.MyKeyGen is not handled",
        ),
        (
            {"hoodie.table.keygenerator.type": "COMPLEX"},
            "COMPLEX key generator with a single record key field",
        ),
    ],
)
def test_unhandled_key_generators_are_refused_with_the_reason(
    props: dict[str, str], reason: str
) -> None:
    config = _config(
        **{"hoodie.table.recordkey.fields": "id", "hoodie.table.partition.fields": "p", **props}
    )
    assert any(reason in r for r in key_generation_refusals(config))
    with pytest.raises(UnsupportedTableError, match=reason.split()[0]):
        key_generation(config)


def test_unhandled_key_field_types_are_refused() -> None:
    keys = KeyGeneration(KeyGeneratorKind.SIMPLE, ("price",), ())
    with pytest.raises(UnsupportedTableError, match="'price'"):
        keys.record_keys(pa.table({"price": [1.5]}))


def test_key_field_types_and_presence_are_checked_against_the_schema() -> None:
    keys = KeyGeneration(KeyGeneratorKind.COMPLEX, ("id", "name"), ("day",))
    keys.check_field_types(
        pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.bool_())])
    )
    with pytest.raises(UnsupportedTableError, match="'day' has type date32"):
        keys.check_field_types(
            pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.date32())])
        )
    with pytest.raises(UnsupportedTableError, match="'name' is not in the table schema"):
        keys.check_field_types(pa.schema([("id", pa.int64()), ("day", pa.string())]))
