"""The writer against the oracle: every table it writes reads back with the expected rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests import oracle

from tms.hudi.files.data import read_log_file
from tms.hudi.files.log_block import BlockType
from tms.hudi.files.markers import TEMP_FOLDER
from tms.hudi.files.names import LogFileName
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.heartbeat import HEARTBEAT_FOLDER
from tms.hudi.timeline.timeline import Timeline
from tms.testing.sample_writer.log_blocks import LogBlockFormat
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter


def batch(ids: range | list[int], ts: int, city: list[str] | None = None) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": pa.array(city or [["sf", "nyc", "la"][i % 3] for i in ids]),
            "fare": pa.array([float(i) + ts / 1000 for i in ids]),
        }
    )


def expected_after(model: dict[str, dict[str, Any]], rows: pa.Table) -> None:
    for row in rows.to_pylist():
        current = model.get(row["id"])
        if current is None or row["ts"] >= current["ts"]:
            model[row["id"]] = {k: row[k] for k in ("id", "ts", "city", "fare")}


def our_file_slices(base: str) -> list[dict[str, Any]]:
    """Latest file slices as our file-system view sees them, in the oracle's form."""
    table = HudiTable.open(base)
    return sorted(
        (
            {
                "partition": s.partition_path,
                "file_id": s.file_id,
                "base_instant": s.base_instant_time,
                "base_file": s.base_file.file_name if s.base_file else "",
                "log_files": [log.file_name for log in s.log_files],
            }
            for s in table.file_system_view(table.timeline()).latest_file_slices()
        ),
        key=lambda s: (s["partition"], s["file_id"]),
    )


@pytest.mark.parametrize("table_version", [6, 9])
@pytest.mark.parametrize("table_type", [MERGE_ON_READ, COPY_ON_WRITE])
@pytest.mark.parametrize("partitioned", [True, False])
def test_insert_upsert_delete_read_back_by_oracle(
    tmp_path: Path, table_type: str, partitioned: bool, table_version: int
) -> None:
    base = str(tmp_path / "trips")
    table = create_table(
        base,
        "trips",
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"] if partitioned else [],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=70)
    model: dict[str, dict[str, Any]] = {}
    first = batch(range(300), ts=1)
    writer.insert(first)
    expected_after(model, first)
    update = batch(range(0, 300, 4), ts=5)
    writer.upsert(update)
    expected_after(model, update)
    stale = batch(range(0, 300, 8), ts=2)  # lower ordering value: loses to ts=5
    writer.upsert(stale)
    expected_after(model, stale)
    fresh = batch(range(300, 330), ts=3)  # new keys inserted by an upsert
    writer.upsert(fresh)
    expected_after(model, fresh)
    doomed = [i for i in range(0, 330, 10)]
    writer.delete(batch(doomed, ts=9).select(["id", "city"]))
    for i in doomed:
        model.pop(f"k{i:04d}")

    got = oracle.rows_by_key(base)
    assert len(got) == len(model) == 330 - len(doomed)
    for key, row in model.items():
        assert got[key] == row

    timeline = HudiTable.open(base).timeline()
    assert [i.state.name for i in timeline.instants] == ["COMPLETED"] * 5
    assert [t for t, _ in oracle.completed_instants(base)] == [
        i.requested_time for i in timeline.instants
    ]
    # markers and heartbeats are gone once instants complete
    assert not list((tmp_path / "trips" / TEMP_FOLDER).iterdir())
    assert not (tmp_path / "trips" / HEARTBEAT_FOLDER).exists() or not list(
        (tmp_path / "trips" / HEARTBEAT_FOLDER).iterdir()
    )
    slices = oracle.file_slices(base)
    assert our_file_slices(base) == slices
    if table_type == MERGE_ON_READ:
        assert any(s["log_files"] for s in slices), "updates of a MOR table go to log files"
    else:
        assert not any(s["log_files"] for s in slices)
    if table_version >= 8:
        assert_layout2_timeline(base, timeline)


def assert_layout2_timeline(base: str, timeline: Timeline) -> None:
    """Instants in `.hoodie/timeline/`, completed ones named by their completion times (unique,
    increasing, each after its request), log files named by the delta commit writing them."""
    completed = {i.requested_time: i.completion_time for i in timeline.instants}
    files = {p.name for p in (Path(base) / ".hoodie" / "timeline").iterdir()}
    times: list[str] = []
    for requested, completion in completed.items():
        assert completion is not None and completion > requested
        assert any(name.startswith(f"{requested}_{completion}.") for name in files)
        times += [requested, completion]
    assert times == sorted(times) and len(set(times)) == len(times)
    for instant in timeline.commits():
        for stat in timeline.commit_metadata(instant).write_stats():
            if stat.log_files:  # a log file records the delta commit it is named by
                assert stat.prev_commit == instant.requested_time
    for file_slice in oracle.file_slices(base):
        for log in file_slice["log_files"]:
            named = LogFileName.parse(log)
            assert named is not None and named.base_instant_time in completed
            assert named.base_instant_time != file_slice["base_instant"]


@pytest.mark.parametrize("table_type", [MERGE_ON_READ, COPY_ON_WRITE])
def test_version_8_tables_read_back_by_oracle(tmp_path: Path, table_type: str) -> None:
    base = str(tmp_path / "t")
    table = create_table(
        base,
        "t",
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=8,
    )
    writer = HudiWriter(table, max_file_rows=40)
    model: dict[str, dict[str, Any]] = {}
    for rows in (batch(range(100), ts=1), batch(range(0, 100, 3), ts=4), batch(range(50), ts=2)):
        writer.upsert(rows)
        expected_after(model, rows)
    assert oracle.rows_by_key(base) == model
    assert our_file_slices(base) == oracle.file_slices(base)
    timeline = HudiTable.open(base).timeline()
    assert [t for t, _ in oracle.completed_instants(base)] == [
        i.requested_time for i in timeline.instants
    ]
    assert_layout2_timeline(base, timeline)


@pytest.mark.parametrize("table_version", [8, 9])
def test_new_layout2_tables_carry_hudi_1x_properties(tmp_path: Path, table_version: int) -> None:
    """The keys Hudi 1.x writes for the version, as in the Hudi-written fixture tables."""
    base = str(tmp_path / "t")
    create_table(
        base,
        "t",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=table_version,
    )
    props = TableConfig.load(Storage(base)).props
    assert props["hoodie.table.version"] == props["hoodie.table.initial.version"]
    assert props["hoodie.table.version"] == str(table_version)
    assert props["hoodie.timeline.layout.version"] == "2"
    assert props["hoodie.timeline.path"] == "timeline"
    assert props["hoodie.timeline.history.path"] == "history"
    assert props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert props["hoodie.table.keygenerator.type"] == "SIMPLE"
    ordering_key = (
        "hoodie.table.ordering.fields" if table_version == 9 else "hoodie.table.precombine.field"
    )
    assert props[ordering_key] == "ts"
    assert (Path(base) / ".hoodie" / "timeline" / "history").is_dir()
    with pytest.raises(ValueError, match="table_version"):
        create_table(
            str(tmp_path / "u"), "u", record_key_fields=["id"], ordering_field=None, table_version=7
        )


def test_batch_duplicates_reduced_to_latest_by_ordering_field(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    table = create_table(base, "t", record_key_fields=["id"], ordering_field="ts")
    rows = pa.table(
        {"id": ["a", "a", "b", "a"], "ts": pa.array([3, 7, 1, 5], pa.int64()), "v": [1, 2, 3, 4]}
    )
    HudiWriter(table).upsert(rows)
    got = oracle.rows_by_key(base)
    assert got == {"a": {"id": "a", "ts": 7, "v": 2}, "b": {"id": "b", "ts": 1, "v": 3}}


def test_complex_keys_and_hive_style_partitions(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    table = create_table(
        base,
        "t",
        table_type=COPY_ON_WRITE,
        record_key_fields=["id", "seq"],
        ordering_field="ts",
        partition_fields=["region"],
        hive_style_partitioning=True,
    )
    rows = pa.table(
        {
            "id": ["a", "a", "b"],
            "seq": pa.array([1, 2, 1], pa.int32()),
            "ts": pa.array([1, 1, 1], pa.int64()),
            "region": ["eu", "eu", "us"],
        }
    )
    HudiWriter(table).insert(rows)
    assert (tmp_path / "t" / "region=eu" / ".hoodie_partition_metadata").exists()
    assert sorted(oracle.rows_by_key(base)) == ["id:a,seq:1", "id:a,seq:2", "id:b,seq:1"]


def test_bad_batches_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    table = create_table(base, "t", record_key_fields=["id"], ordering_field="ts")
    writer = HudiWriter(table)
    with pytest.raises(ValueError, match="record key fields missing"):
        writer.upsert(pa.table({"other": [1], "ts": [1]}))
    with pytest.raises(ValueError, match="null values"):
        writer.upsert(pa.table({"id": pa.array([None, "x"], pa.string()), "ts": [1, 2]}))
    assert HudiTable.open(base).timeline().instants == ()
    with pytest.raises(FileExistsError):
        create_table(base, "t", record_key_fields=["id"], ordering_field="ts")


def test_a_delete_as_latest_commit_keeps_the_table_readable(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    table = create_table(base, "t", record_key_fields=["id"], ordering_field="ts")
    writer = HudiWriter(table)
    writer.insert(batch(range(10), ts=1))
    writer.delete(batch([3, 4], ts=2).select(["id", "city"]))
    assert sorted(oracle.rows_by_key(base)) == [f"k{i:04d}" for i in range(10) if i not in (3, 4)]


@pytest.mark.parametrize("table_version", [6, 9])
def test_parquet_log_blocks_read_back_by_oracle(tmp_path: Path, table_version: int) -> None:
    base = str(tmp_path / "t")
    table = create_table(
        base,
        "t",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=50, log_block_format=LogBlockFormat.PARQUET)
    model: dict[str, dict[str, Any]] = {}
    for rows in (
        batch(range(90), ts=1),
        batch(range(0, 90, 4), ts=3),
        batch(range(0, 90, 6), ts=2),
    ):
        writer.upsert(rows)
        expected_after(model, rows)
    writer.delete(batch([8, 9], ts=9).select(["id", "city"]))
    del model["k0008"], model["k0009"]

    assert oracle.rows_by_key(base) == model
    assert our_file_slices(base) == oracle.file_slices(base)
    blocks = [
        block.block_type
        for s in HudiTable.open(base).file_system_view().latest_file_slices()
        for log in s.log_files
        for block in read_log_file(table.storage, log.path)
    ]
    assert BlockType.PARQUET_DATA in blocks and BlockType.AVRO_DATA not in blocks
