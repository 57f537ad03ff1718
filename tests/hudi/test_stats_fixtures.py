"""Column stats and partition stats computed from Parquet footers against what Hudi 1.1 wrote
into the metadata tables of the real v9 fixtures (`cow_v9_txns_simple_meta`,
`mor_avro_v9_txns_simple_meta`): every key and every field must be Hudi's.

The fixtures' metadata records are decoded here directly (base HFiles, then the HFile data
blocks of the log files of completed metadata-table instants, newest value per key); the
metadata-table reader proper lives elsewhere.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from tests.hudi.test_fixture_views import WITH_METADATA_TABLE, unzip_fixture

from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.files.log_block import BlockType, HeaderKey
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.hfile import HFileReader
from tms.hudi.metadata.column_stats import (
    COLUMN_STATS_RECORD_TYPE,
    column_stats_entries,
    range_from_payload,
    ranges_from_footer,
)
from tms.hudi.metadata.index_defs import column_stats_columns, read_index_definitions
from tms.hudi.metadata.partition_stats import (
    PARTITION_STATS_RECORD_TYPE,
    column_types,
    files_counted,
    partition_stats_entries,
)
from tms.hudi.metadata.stats_keys import column_stats_key
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action


@dataclasses.dataclass
class Written:
    record: dict[str, Any]
    instant: str
    """The metadata-table instant that wrote this value (the base file's for a base file)."""


def _decode(schema_json: str, value: bytes) -> dict[str, Any]:
    parsed = fastavro.parse_schema(json.loads(schema_json))
    record = fastavro.schemaless_reader(
        io.BytesIO(value), parsed, None, return_record_name=True, return_record_name_override=True
    )
    assert isinstance(record, dict)
    return record


def mdt_partition(root: Path, partition: str) -> dict[str, Written]:
    """Newest record per key of one metadata-table partition."""
    mdt = root / ".hoodie" / "metadata"
    completed = {
        p.name.split("_")[0]
        for p in (mdt / ".hoodie" / "timeline").iterdir()
        if p.is_file() and "_" in p.name and not p.name.endswith((".requested", ".inflight"))
    }
    newest: dict[str, Written] = {}
    folder = mdt / partition
    for path in sorted(folder.glob("*.hfile")):
        reader = HFileReader(path)
        schema = reader.file_info[b"schema"].decode()
        instant = path.stem.rsplit("_", 1)[-1]
        for key, value in reader.entries():
            newest[key.decode()] = Written(_decode(schema, value), instant)
    logs = sorted(folder.glob(".*.log.*"), key=lambda p: (p.name.split("_")[1].split(".")[0], p))
    for path in logs:
        if path.name.split("_")[1].split(".")[0] not in completed:
            continue
        for block in read_log_blocks(path.read_bytes()):
            if block.block_type is not BlockType.HFILE_DATA:
                continue
            schema = block.header[HeaderKey.SCHEMA]
            instant = block.header[HeaderKey.INSTANT_TIME]
            for key, value in HFileReader(block.content).entries():
                newest[key.decode()] = Written(_decode(schema, value), instant)
    return newest


@pytest.fixture(scope="module", params=WITH_METADATA_TABLE)
def table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unzip_fixture(request.param, tmp_path_factory.mktemp(request.param))


def _columns(root: Path) -> tuple[list[str], Any, dict[str, Any]]:
    hudi = HudiTable.open(str(root))
    schema = json.loads(hudi.config.get("hoodie.table.create.schema"))
    definitions = read_index_definitions(hudi.storage, hudi.config)
    columns, version = column_stats_columns(definitions, schema)
    return columns, version, schema


def test_column_stats_of_every_latest_base_file_are_hudis(table: Path) -> None:
    written = mdt_partition(table, "column_stats")
    columns, version, _ = _columns(table)
    assert len(columns) == 16 and version.name == "V2"
    view = HudiTable.open(str(table)).file_system_view()
    compared = 0
    for piece in view.latest_file_slices():
        if piece.base_file is None:
            continue
        footer = pq.ParquetFile(table / piece.base_file.path).metadata
        entries = column_stats_entries(
            piece.partition_path, piece.base_file.file_name, footer, columns, version
        )
        assert [e[1]["columnName"] for e in entries] == columns
        for key, payload in entries:
            assert key in written, f"{piece.base_file.file_name} {payload['columnName']}: no key"
            assert written[key].record["type"] == COLUMN_STATS_RECORD_TYPE
            assert payload == written[key].record["ColumnStatsMetadata"]
            compared += 1
    assert compared == 5 * 16


def _view_until(root: Path, instant: str, *, inclusive: bool) -> FileSystemView:
    hudi = HudiTable.open(str(root))
    timeline = hudi.timeline()
    kept = tuple(
        i
        for i in timeline.instants
        if i.requested_time < instant or (inclusive and i.requested_time == instant)
    )
    return FileSystemView.build(hudi.storage, dataclasses.replace(timeline, instants=kept))


def test_partition_stats_of_every_partition_are_hudis(table: Path) -> None:
    """Each partition's stats as Hudi last wrote them, recomputed from the files Hudi counted
    then: base files from their footers, log files from their `column_stats` records (their
    ranges come from the records, which a footer cannot give)."""
    file_stats = mdt_partition(table, "column_stats")
    partition_stats = mdt_partition(table, "partition_stats")
    columns, version, schema = _columns(table)
    types = column_types(schema, columns)
    timeline = HudiTable.open(str(table)).timeline()
    by_partition: dict[str, list[Written]] = {}
    for value in partition_stats.values():
        stats = value.record["ColumnStatsMetadata"]
        assert value.record["type"] == PARTITION_STATS_RECORD_TYPE
        by_partition.setdefault(stats["fileName"], []).append(value)
    assert sorted(by_partition) == ["region=apac", "region=eu", "region=us"]
    saw_replace = False
    for partition, values in by_partition.items():
        (instant,) = {v.instant for v in values}
        data_instant = timeline.get(instant)
        assert data_instant is not None and data_instant.is_completed
        replaced: list[str] = []
        if data_instant.action is Action.REPLACE_COMMIT:
            saw_replace = True
            metadata = timeline.commit_metadata(data_instant)
            replaced = list(metadata.partition_to_replace_file_ids.get(partition, []))
        before = _view_until(table, instant, inclusive=False).latest_merged_file_slices(partition)
        after = _view_until(table, instant, inclusive=True).latest_merged_file_slices(partition)
        ranges = []
        for name in files_counted(before, after, replaced):
            if name.endswith(".parquet"):
                footer = pq.ParquetFile(table / partition / name).metadata
                ranges += ranges_from_footer(name, footer, columns, version)
            else:
                for column in columns:
                    record = file_stats[column_stats_key(partition, name, column)].record
                    ranges.append(range_from_payload(record["ColumnStatsMetadata"]))
        expected = {k: v.record["ColumnStatsMetadata"] for k, v in partition_stats.items()}
        computed = dict(partition_stats_entries(partition, ranges, types, columns))
        assert len(computed) == len(columns)
        for key, payload in computed.items():
            assert payload == expected[key], f"{partition} {payload['columnName']}"
    assert saw_replace, "a partition last written by a clustering shows the replaced-groups quirk"
