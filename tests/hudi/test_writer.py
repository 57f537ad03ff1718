"""The writer against the oracle: every table it writes reads back with the expected rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests import oracle

from tms.hudi.files.markers import TEMP_FOLDER
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline.heartbeat import HEARTBEAT_FOLDER
from tms.hudi.write.new_table import create_table
from tms.hudi.write.writer import HudiWriter


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


@pytest.mark.parametrize("table_type", [MERGE_ON_READ, COPY_ON_WRITE])
@pytest.mark.parametrize("partitioned", [True, False])
def test_insert_upsert_delete_read_back_by_oracle(
    tmp_path: Path, table_type: str, partitioned: bool
) -> None:
    base = str(tmp_path / "trips")
    table = create_table(
        base,
        "trips",
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"] if partitioned else [],
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
    if table_type == MERGE_ON_READ:
        assert any(s["log_files"] for s in slices), "updates of a MOR table go to log files"
    else:
        assert not any(s["log_files"] for s in slices)


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
