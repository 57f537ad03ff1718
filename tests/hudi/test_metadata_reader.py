"""The metadata table of the real Hudi 1.1 fixtures, read by `tms.hudi.metadata`: its `files`
partition against storage listings and hudi-rs, its record index and secondary indexes against
the rows hudi-rs reads, and every stored record decoded and encoded back byte for byte."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests import oracle
from tests.hudi.test_fixture_views import WITH_METADATA_TABLE, rows_of, unzip_fixture
from typer.testing import CliRunner

from hudi import HudiTable as OracleTable
from tms.cli import app
from tms.hudi.files.log_block import BlockType, HeaderKey
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.hfile import HFileReader
from tms.hudi.metadata.keys import column_stats_key, partition_stats_key
from tms.hudi.metadata.listing import metadata_file_system_view
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.schema import decode_record, encode_record
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable

EPOCH = datetime.date(1970, 1, 1)


@pytest.fixture(params=WITH_METADATA_TABLE)
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return unzip_fixture(request.param, tmp_path)


def reader_of(root: Path, as_of: str | None = None) -> MetadataTableReader:
    return MetadataTableReader.open(Storage(str(root)), as_of=as_of)


def committed_files_on_storage(root: Path) -> dict[str, dict[str, int]]:
    """Every data file whose instant completed, by partition: what `files` must list."""
    timeline = HudiTable.open(str(root)).timeline()
    out: dict[str, dict[str, int]] = {}
    for marker in root.rglob(".hoodie_partition_metadata"):
        folder = marker.parent
        if ".hoodie" in folder.relative_to(root).parts:
            continue
        partition = folder.relative_to(root).as_posix()
        found: dict[str, int] = {}
        for path in folder.iterdir():
            base, log = BaseFileName.parse(path.name), LogFileName.parse(path.name)
            instant = base.instant_time if base else log.base_instant_time if log else None
            if instant is not None and timeline.is_completed(instant):
                found[path.name] = path.stat().st_size
        out["" if partition == "." else partition] = found
    return out


def test_files_partition_lists_every_committed_file_with_its_size(table: Path) -> None:
    reader = reader_of(table)
    assert reader.partition_list() == sorted(committed_files_on_storage(table))
    assert reader.all_files() == committed_files_on_storage(table)


def test_slices_planned_from_the_metadata_table_are_the_listings_and_hudi_rs(table: Path) -> None:
    """hudi-rs plans from the `files` partition on the fixture as it is; so do we, and both
    equal the slices our view builds by listing storage."""
    from_metadata = rows_of(metadata_file_system_view(reader_of(table)).latest_file_slices())
    from_listing = rows_of(HudiTable.open(str(table)).file_system_view().latest_file_slices())
    assert from_metadata == from_listing
    assert from_metadata == oracle.file_slices(str(table))


def live_rows(root: Path, *columns: str) -> list[dict[str, Any]]:
    batches = OracleTable(str(root)).read()
    return pa.Table.from_batches(batches).select(list(columns)).to_pylist()


def file_id_of(file_name: str) -> str:
    base, log = BaseFileName.parse(file_name), LogFileName.parse(file_name)
    return base.file_id if base else log.file_id if log else file_name


def test_record_index_maps_every_live_key_to_the_file_group_holding_it(table: Path) -> None:
    rows = live_rows(table, "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")
    assert len(rows) >= 10
    expected = {
        r["_hoodie_record_key"]: (r["_hoodie_partition_path"], file_id_of(r["_hoodie_file_name"]))
        for r in rows
    }
    locations = reader_of(table).record_locations([*expected, "TXN-002", "TXN-005", "nope"])
    assert {k: (v.partition_path, v.file_id) for k, v in locations.items()} == expected


def test_record_index_lookup_reads_only_the_file_groups_keys_route_to(table: Path) -> None:
    reader = reader_of(table)
    full = reader.read_partition("record_index")
    for key, record in full.items():
        assert reader.lookup("record_index", [key]) == {key: record}


@pytest.mark.parametrize(
    ("index", "column", "as_text"),
    [
        ("merchant_idx", "merchant_name", lambda v: v),
        ("txn_date_idx", "txn_date", lambda v: None if v is None else str((v - EPOCH).days)),
    ],
)
def test_secondary_indexes_map_each_live_value_to_its_key(
    table: Path, index: str, column: str, as_text: Any
) -> None:
    rows = live_rows(table, "_hoodie_record_key", column)
    expected = sorted(
        ((as_text(r[column]), r["_hoodie_record_key"]) for r in rows),
        key=lambda e: (e[0] is not None, e[0] or "", e[1]),
    )
    assert reader_of(table).secondary_index(index) == expected


def test_column_and_partition_stats_of_a_live_file(table: Path) -> None:
    reader = reader_of(table)
    files = reader.files("region=us")
    newest = max(files, key=lambda name: name.rsplit("_", 1)[-1])
    stats = reader.column_stats("region=us", newest, "txn_id")
    assert stats is not None and stats.file_name == newest and stats.column_name == "txn_id"
    assert stats.value_count and stats.min_value is not None
    record = reader.lookup("column_stats", [column_stats_key("region=us", newest, "txn_id")])
    assert len(record) == 1
    partition = reader.partition_stats("region=us", "txn_ts")
    assert partition is not None and partition.file_name == "region=us"
    assert partition_stats_key("region=us", "txn_ts") in reader.read_partition("partition_stats")
    live_us = [r["txn_ts"] for r in live_rows(table, "txn_ts", "region") if r["region"] == "us"]
    assert partition.min_value is not None and partition.max_value is not None
    assert partition.min_value.value <= min(live_us)
    assert partition.max_value.value >= max(live_us)


def test_reading_as_of_an_earlier_instant_sees_the_files_of_then(table: Path) -> None:
    """As of the first commit, the metadata table lists only what that commit wrote."""
    timeline = HudiTable.open(str(table)).timeline()
    first = timeline.commits()[0]
    written = timeline.commit_metadata(first).partition_to_write_stats
    reader = reader_of(table, as_of=first.requested_time)
    assert reader.partition_list() == sorted(written)
    for partition, stats in written.items():
        assert set(reader.files(partition)) == {s.path.rsplit("/", 1)[-1] for s in stats}


def metadata_hfiles(root: Path) -> list[tuple[str, bytes]]:
    """(where, HFile bytes) of every base file and every HFile data block of the table."""
    found: list[tuple[str, bytes]] = []
    for path in sorted((root / ".hoodie" / "metadata").rglob("*")):
        if path.suffix == ".hfile":
            found.append((path.name, path.read_bytes()))
        elif LogFileName.parse(path.name) is not None:
            for n, block in enumerate(read_log_blocks(path.read_bytes())):
                if block.block_type is BlockType.HFILE_DATA:
                    assert HeaderKey.SCHEMA in block.header
                    found.append((f"{path.name}#{n}", block.content))
    return found


def test_every_stored_record_decodes_and_encodes_back_byte_for_byte(table: Path) -> None:
    count = 0
    for where, data in metadata_hfiles(table):
        reader = HFileReader(data)
        schema = reader.file_info[b"schema"].decode()
        for key, value in reader.entries():
            record = decode_record(value, schema)
            assert encode_record(record, schema) == value, f"{where} {key!r}"
            count += 1
    assert count > 100


def test_tms_metadata_prints_partitions_and_the_file_count_of_each_data_partition(
    table: Path,
) -> None:
    result = CliRunner().invoke(app, ["metadata", "--base-path", str(table), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    groups = {p["partition"]: p["file_groups"] for p in document["metadata_partitions"]}
    assert groups["files"] == 1 and groups["record_index"] == 10
    assert set(groups) == set(HudiTable.open(str(table)).config.metadata_partitions)
    counts = {row["partition"]: row["files"] for row in document["files"]}
    assert counts == {p: len(f) for p, f in committed_files_on_storage(table).items()}
    text = CliRunner().invoke(app, ["metadata", "--base-path", str(table)])
    assert text.exit_code == 0 and "secondary_index_merchant_idx" in text.output


def test_tms_metadata_exits_2_on_a_table_without_one(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_nometa", tmp_path)
    result = CliRunner().invoke(app, ["metadata", "--base-path", str(root)])
    assert result.exit_code == 2
    assert "no metadata table" in result.output
