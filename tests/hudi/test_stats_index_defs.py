"""The table's index definitions and the columns column stats cover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.hudi.test_fixture_views import unzip_fixture

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.index_defs import (
    IndexVersion,
    column_stats_columns,
    index_definitions_path,
    parse_index_definitions,
    read_index_definitions,
)
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage

META = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key"]


def _document(**entries: dict) -> str:
    return json.dumps({"indexDefinitions": entries})


def test_a_real_tables_definitions(tmp_path: Path) -> None:
    root = unzip_fixture("mor_avro_v9_txns_simple_meta", tmp_path)
    storage = Storage(str(root))
    definitions = read_index_definitions(storage, TableConfig.load(storage))
    assert sorted(definitions) == [
        "column_stats",
        "record_index",
        "secondary_index_merchant_idx",
        "secondary_index_txn_date_idx",
    ]
    stats = definitions["column_stats"]
    assert stats.version is IndexVersion.V2 and stats.source_fields[:3] == tuple(META)
    assert definitions["record_index"].options == {"isPartitioned": "false"}
    assert definitions["secondary_index_merchant_idx"].source_fields == ("merchant_name",)
    columns, version = column_stats_columns(definitions, {"fields": []})
    assert columns == list(stats.source_fields) and version is IndexVersion.V2


@pytest.mark.parametrize("index_type", ["expression_index", "bloom_filters", "vector_index"])
def test_an_index_type_we_cannot_keep_true_refuses_the_table(index_type: str) -> None:
    text = _document(idx={"indexName": "idx", "indexType": index_type, "sourceFields": ["a"]})
    with pytest.raises(UnsupportedTableError, match=index_type):
        parse_index_definitions(text)


def test_where_the_definitions_are() -> None:
    def path(value: str) -> str | None:
        return index_definitions_path(TableConfig({"hoodie.table.index.defs.path": value}))

    assert path("") is None
    assert path(".hoodie/.index_defs/index.json") == ".hoodie/.index_defs/index.json"
    assert path("/old/place/t/.hoodie/.index_defs/index.json") == ".hoodie/.index_defs/index.json"
    for outside in ("../elsewhere.json", "data/index.json", "s3://b/t/index.json"):
        with pytest.raises(UnsupportedTableError):
            path(outside)


def test_a_missing_definitions_file_refuses(tmp_path: Path) -> None:
    config = TableConfig({"hoodie.table.index.defs.path": ".hoodie/.index_defs/index.json"})
    with pytest.raises(UnsupportedTableError, match="does not exist"):
        read_index_definitions(Storage(str(tmp_path)), config)
    assert read_index_definitions(Storage(str(tmp_path)), TableConfig({})) == {}


def test_columns_without_a_definition_follow_hudis_defaults() -> None:
    """Meta columns first (name order), then the first N supported top-level fields; records,
    arrays, maps, enums and decimals wider than Decimal(30, 15) are skipped."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "_hoodie_commit_seqno", "type": ["null", "string"]},
            {"name": "id", "type": "string"},
            {"name": "nested", "type": {"type": "record", "name": "n", "fields": []}},
            {"name": "tags", "type": ["null", {"type": "array", "items": "string"}]},
            {"name": "kind", "type": {"type": "enum", "name": "k", "symbols": ["A"]}},
            {
                "name": "wide",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 2},
            },
            {
                "name": "amount",
                "type": {
                    "type": "fixed",
                    "name": "f",
                    "size": 5,
                    "logicalType": "decimal",
                    "precision": 10,
                    "scale": 2,
                },
            },
            {"name": "ts", "type": ["null", "long"]},
        ],
    }
    assert column_stats_columns({}, schema) == ([*META, "id", "amount", "ts"], IndexVersion.V1)
    assert column_stats_columns({}, schema, max_columns=1)[0] == [*META, "id"]
    assert column_stats_columns({}, schema, populate_meta_fields=False)[0] == ["id", "amount", "ts"]
    explicit = column_stats_columns({}, schema, explicit_columns=["ts", "nested", "nope"])
    assert explicit[0] == [*META, "ts"]
