"""New metadata records follow the schema the table's metadata files carry, whatever the table
version: Hudi 1.0 writes version 8 with a `HoodieMetadataRecord` that has no `ArrayWrapper`
branch and no `valueType` in column stats, and a reader that reconciles one file group's
schemas (hudi-rs) refuses a log block under Hudi 1.1's schema next to them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tms.hudi.metadata.column_stats import ColumnRange, range_from_payload
from tms.hudi.metadata.records import stats_record
from tms.hudi.metadata.schema import (
    METADATA_RECORD_0X,
    METADATA_RECORD_1X,
    decode_record,
    encode_record,
    writer_schema,
)
from tms.hudi.metadata.stats_values import ValueType


def _without_1_1_additions(node: Any) -> Any:
    """Hudi 1.0's schema as its files carry it: 1.1's without `ArrayWrapper` and `valueType`."""
    if isinstance(node, list):
        named = (b.get("name") if isinstance(b, dict) else b for b in node)
        return [
            _without_1_1_additions(b)
            for b, name in zip(node, named, strict=True)
            if not str(name).endswith("ArrayWrapper")
        ]
    if not isinstance(node, dict):
        return node
    out = {key: _without_1_1_additions(value) for key, value in node.items()}
    if node.get("name") == "HoodieMetadataColumnStats":
        out["fields"] = [f for f in out["fields"] if f["name"] != "valueType"]
    return out


HUDI_1_0_SCHEMA = json.dumps(_without_1_1_additions(json.loads(METADATA_RECORD_1X)))


@pytest.mark.parametrize("table_version", [6, 8, 9])
def test_the_schema_of_the_files_wins_over_the_table_versions_default(table_version: int) -> None:
    assert writer_schema(table_version, HUDI_1_0_SCHEMA) == HUDI_1_0_SCHEMA
    assert writer_schema(table_version, METADATA_RECORD_0X) == METADATA_RECORD_0X


def test_a_metadata_table_without_files_gets_the_table_versions_schema() -> None:
    assert writer_schema(8, None) == writer_schema(9, None) == METADATA_RECORD_1X
    assert writer_schema(6, None) == METADATA_RECORD_0X


def test_column_stats_of_a_version_8_table_encode_under_hudi_1_0s_schema() -> None:
    stats = ColumnRange(
        file_name="f1_0-1-0_001.parquet",
        column_name="ts",
        min_value=10,
        max_value=20,
        null_count=0,
        value_count=4,
        total_size=90,
        total_uncompressed_size=100,
        value_type=ValueType.V1,  # index version V1, as version 8 tables carry it
        v1_wrapper="LongWrapper",
    )
    record = stats_record("key", stats.payload())
    written = encode_record(record.fields, HUDI_1_0_SCHEMA)
    read = decode_record(written, HUDI_1_0_SCHEMA)
    assert "valueType" not in read["ColumnStatsMetadata"]
    assert range_from_payload(read["ColumnStatsMetadata"]) == stats
    # the same record under 1.1's schema is other bytes: what hudi-rs could not reconcile
    assert encode_record(record.fields, METADATA_RECORD_1X) != written
