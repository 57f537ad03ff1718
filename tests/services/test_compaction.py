"""Compaction against the oracle: a compacted table reads back the same, without log files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle
from tests.services.timeline_files import timeline_dir
from tms.hudi.avro import codec as avro_codec
from tms.hudi.errors import CompactionConflictError, PlanNotFoundError, UnsupportedTableError
from tms.hudi.files.codec import codec_of_footer
from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
from tms.hudi.files.markers import TEMP_FOLDER
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.properties import COPY_ON_WRITE, METADATA_PARTITIONS
from tms.hudi.table import HudiTable
from tms.hudi.timeline.heartbeat import HEARTBEAT_FOLDER
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import new_instant_time, request
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.services.compaction.strategy import (
    MIB,
    TOTAL_IO_MB,
    TOTAL_IO_READ_MB,
    TOTAL_IO_WRITE_MB,
    TOTAL_LOG_FILES,
    TOTAL_LOG_FILES_SIZE,
    AllSlicesStrategy,
    LogSizeStrategy,
    strategy_by_name,
)
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

CITIES = ("sf", "nyc", "la")
Model = dict[str, dict[str, Any]]


def batch(ids: range | list[int], ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": pa.array([CITIES[i % 3] for i in ids]),
            "fare": pa.array([float(i) + ts / 1000 for i in ids]),
        }
    )


def upsert(writer: HudiWriter, model: Model, rows: pa.Table) -> None:
    writer.upsert(rows)
    for row in rows.to_pylist():
        current = model.get(row["id"])
        if current is None or row["ts"] >= current["ts"]:
            model[row["id"]] = row


def delete(writer: HudiWriter, model: Model, ids: list[int]) -> None:
    writer.delete(batch(ids, ts=99).select(["id", "city"]))
    for i in ids:
        model.pop(f"k{i:04d}", None)


def mor_table(
    tmp_path: Path, partitioned: bool = True, max_file_rows: int = 100, table_version: int = 6
) -> tuple[str, HudiWriter, Model]:
    """A MOR table after an insert and several delta commits of updates and deletes."""
    base = str(tmp_path / "trips")
    table = create_table(
        base,
        "trips",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"] if partitioned else [],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=max_file_rows)
    model: Model = {}
    upsert(writer, model, batch(range(600), ts=1))
    upsert(writer, model, batch(range(0, 600, 4), ts=5))
    upsert(writer, model, batch(range(0, 600, 8), ts=2))  # stale: loses to ts=5
    delete(writer, model, list(range(0, 600, 10)))
    upsert(writer, model, batch(range(1, 600, 9), ts=7))
    upsert(writer, model, batch(range(600, 640), ts=3))  # new keys: new file groups
    return base, writer, model


def latest_plan(base: str) -> dict[str, Any]:
    timeline = HudiTable.open(base).timeline()
    return timeline.compaction_plan(timeline.pending_compactions()[-1])


def slices_with_logs(base: str) -> list[dict[str, Any]]:
    return [s for s in oracle.file_slices(base) if s["log_files"]]


# Scheduling -----------------------------------------------------------------------------------


def test_plan_names_each_slice_as_hudi_does(tmp_path: Path, table_version: int) -> None:
    base, _, _ = mor_table(tmp_path, table_version=table_version)
    expected = slices_with_logs(base)
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    requested = timeline_dir(base) / f"{instant}.compaction.requested"
    plan = avro_codec.decode(requested.read_bytes(), "HoodieCompactionPlan")
    assert plan["version"] == 2
    got = sorted(
        (
            {
                "partition": op["partitionPath"],
                "file_id": op["fileId"],
                "base_instant": op["baseInstantTime"],
                "base_file": op["dataFilePath"],  # version 2: names, not paths
                "log_files": op["deltaFilePaths"],
            }
            for op in plan["operations"]
        ),
        key=lambda s: (s["partition"], s["file_id"]),
    )
    assert got == expected
    for op in plan["operations"]:
        metrics = op["metrics"]
        sizes = [
            (Path(base) / op["partitionPath"] / n).stat().st_size for n in op["deltaFilePaths"]
        ]
        assert metrics[TOTAL_LOG_FILES] == len(op["deltaFilePaths"])
        assert metrics[TOTAL_LOG_FILES_SIZE] == sum(sizes)
        assert metrics[TOTAL_IO_MB] == metrics[TOTAL_IO_READ_MB] + metrics[TOTAL_IO_WRITE_MB]
    # only the compaction was written; its file groups are taken until it completes
    scheduled = HudiTable.open(base).timeline().get(instant)
    assert scheduled is not None and scheduled.state is State.REQUESTED
    assert schedule_compaction(HudiTable.open(base)) is None


def test_log_size_strategy_leaves_small_slices_out(tmp_path: Path, table_version: int) -> None:
    base, writer, model = mor_table(tmp_path, max_file_rows=1000, table_version=table_version)
    for ts in (20, 21, 22):  # many updates of sf only: its logs grow, the others stay small
        upsert(writer, model, batch(range(0, 600, 3), ts=ts))
    sizes = {(s["partition"]): s for s in slices_with_logs(base)}
    log_size = {
        p: sum(os.path.getsize(Path(base) / p / n) for n in s["log_files"])
        for p, s in sizes.items()
    }
    assert log_size["sf"] > max(log_size["nyc"], log_size["la"])
    threshold = max(log_size["nyc"], log_size["la"]) + 1

    big = schedule_compaction(HudiTable.open(base), strategy=LogSizeStrategy(threshold))
    assert big is not None
    assert [op["partitionPath"] for op in latest_plan(base)["operations"]] == ["sf"]
    # the rest is left for a later plan, which cannot take sf's file group again
    rest = schedule_compaction(HudiTable.open(base), strategy="all")
    assert rest is not None and rest > big
    assert sorted(op["partitionPath"] for op in latest_plan(base)["operations"]) == ["la", "nyc"]
    assert schedule_compaction(HudiTable.open(base), strategy="log-size") is None


def _slice(name: str, base_size: int, log_sizes: list[int]) -> FileSlice:
    base = BaseFile(
        BaseFileName(name, "0-0-0", "20240101000000000"), f"p/{name}.parquet", base_size
    )
    logs = tuple(
        LogFile(LogFileName(name, "20240101000000000", v + 1), f"p/.{name}.log.{v}", size)
        for v, size in enumerate(log_sizes)
    )
    return FileSlice("p", name, "20240101000000000", base if base_size else None, logs)


def test_log_size_strategy_orders_by_log_size_and_bounds_io() -> None:
    slices = [
        _slice("small", 100 * MIB, [1 * MIB]),
        _slice("large", 100 * MIB, [30 * MIB, 30 * MIB]),
        _slice("medium", 100 * MIB, [20 * MIB]),
        _slice("clean", 100 * MIB, []),
    ]
    assert [s.file_id for s in LogSizeStrategy(max_io_mb=None).select(slices)] == [
        "large",
        "medium",
        "small",
    ]
    # large costs 160 MB read + 100 MB write; the slice crossing the bound is still taken
    assert [s.file_id for s in LogSizeStrategy(max_io_mb=300).select(slices)] == [
        "large",
        "medium",
    ]
    assert [s.file_id for s in LogSizeStrategy(threshold_bytes=10 * MIB).select(slices)] == [
        "large",
        "medium",
    ]
    assert [s.file_id for s in AllSlicesStrategy().select(slices)] == ["small", "large", "medium"]
    with pytest.raises(ValueError, match="all, log-size"):
        strategy_by_name("biggest")


def test_refuses_copy_on_write_and_unsupported_tables(tmp_path: Path) -> None:
    cow = str(tmp_path / "cow")
    HudiWriter(
        create_table(
            cow, "cow", table_type=COPY_ON_WRITE, record_key_fields=["id"], ordering_field="ts"
        )
    ).insert(batch(range(10), ts=1))
    with pytest.raises(UnsupportedTableError, match="MERGE_ON_READ"):
        schedule_compaction(HudiTable.open(cow))

    with_mdt = str(tmp_path / "mdt")
    table = create_table(
        with_mdt,
        "mdt",
        record_key_fields=["id"],
        ordering_field="ts",
        extra_properties={METADATA_PARTITIONS: "files"},
    )
    writer = HudiWriter(table)
    writer.insert(batch(range(10), ts=1))
    writer.upsert(batch(range(5), ts=2))
    with pytest.raises(UnsupportedTableError, match="metadata table"):
        schedule_compaction(HudiTable.open(with_mdt))
    for base in (cow, with_mdt):
        assert not HudiTable.open(base).timeline().pending_compactions()


def test_refuses_instants_the_timeline_does_not_allow(tmp_path: Path, table_version: int) -> None:
    base, _, _ = mor_table(tmp_path, table_version=table_version)
    table = HudiTable.open(base)
    first = table.timeline().instants[0].requested_time
    with pytest.raises(CompactionConflictError, match="already on the timeline"):
        schedule_compaction(table, instant_time=first)
    earlier = str(int(first) - 1)
    with pytest.raises(CompactionConflictError, match="must be earlier"):
        schedule_compaction(table, instant_time=earlier)
    # a write still pending: its log files could be missed
    pending = new_instant_time(table.timeline().instants)
    request(table.storage, table.config, pending, Action.DELTA_COMMIT)
    with pytest.raises(CompactionConflictError, match="writes are pending"):
        schedule_compaction(HudiTable.open(base))
    assert not HudiTable.open(base).timeline().pending_compactions()


# Execution ------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("partitioned", [True, False])
def test_compaction_keeps_the_snapshot_and_removes_log_files(
    spark: Any, tmp_path: Path, partitioned: bool, table_version: int
) -> None:
    base, _, model = mor_table(tmp_path, partitioned=partitioned, table_version=table_version)
    before = oracle.snapshot(base)
    assert oracle.rows_by_key(base) == model
    compacted = slices_with_logs(base)
    assert compacted

    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    result = execute_compaction(spark, HudiTable.open(base), instant, heartbeat_interval=1)

    assert oracle.snapshot(base).equals(before)
    after = oracle.file_slices(base)
    assert not [s for s in after if s["log_files"]]
    new_bases = {s["file_id"]: s for s in after if s["base_instant"] == instant}
    assert sorted(new_bases) == sorted(s["file_id"] for s in compacted)
    assert (instant, "commit") in oracle.completed_instants(base)

    timeline = HudiTable.open(base).timeline()
    done = timeline.get(instant)
    assert done is not None and done.is_completed and done.action is Action.COMMIT
    metadata = timeline.commit_metadata(done)
    assert metadata.compacted and metadata.operation_type == "COMPACT"
    assert metadata.schema == timeline.latest_schema() and metadata.schema
    stats = metadata.write_stats()
    assert {s.file_id for s in stats} == set(new_bases)
    for stat in stats:
        assert stat.path and stat.path.endswith(new_bases[stat.file_id]["base_file"])
        assert stat.prev_commit != instant and stat.total_log_files_compacted >= 1
        # the codec of the base files compacted, as the table's writer chose it
        assert codec_of_footer(pq.read_metadata(Path(base) / stat.path)) == "snappy"
    assert result.file_groups == result.files_written == len(compacted)
    assert result.records_written == sum(s.num_writes for s in stats)
    assert result.log_files_compacted == sum(len(s["log_files"]) for s in compacted)
    assert result.bytes_written == sum(s.file_size_in_bytes for s in stats) > 0
    gone = [i for i in range(600) if f"k{i:04d}" not in model]  # deleted, not re-inserted
    assert sum(s.num_deletes for s in stats) == len(gone) > 0
    assert not (Path(base) / TEMP_FOLDER / instant).exists()
    assert not (Path(base) / HEARTBEAT_FOLDER / instant).exists()
    assert schedule_compaction(HudiTable.open(base)) is None


@pytest.mark.spark
def test_writes_during_a_pending_compaction_read_back_after_it(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base, writer, model = mor_table(tmp_path, table_version=table_version)
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    # the writer keeps going: its log files start the slice of the compaction's base file
    # (named by the compaction instant in layout 1, by their own delta commit in layout 2)
    existing = set(Path(base).rglob(".*.log.*"))
    delete(writer, model, list(range(3, 600, 11)))
    upsert(writer, model, batch(range(0, 600, 5), ts=30))
    logs: dict[str, list[str]] = {}
    for log in sorted(set(Path(base).rglob(".*.log.*")) - existing):
        name = LogFileName.parse(log.name)
        assert name is not None
        assert (name.base_instant_time == instant) is (table_version == 6)
        logs.setdefault(name.file_id, []).append(log.name)
    assert logs

    execute_compaction(spark, HudiTable.open(base), instant)
    assert oracle.rows_by_key(base) == model
    after = {s["file_id"]: s for s in oracle.file_slices(base)}
    for file_id, names in logs.items():  # the compaction's base file, then the new logs
        assert after[file_id]["base_instant"] == instant
        assert after[file_id]["base_file"] is not None
        assert after[file_id]["log_files"] == names

    again = schedule_compaction(HudiTable.open(base))
    assert again is not None
    execute_compaction(spark, HudiTable.open(base), again)
    assert oracle.rows_by_key(base) == model
    assert not slices_with_logs(base)


@pytest.mark.spark
def test_executing_an_unknown_or_completed_compaction_is_refused(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base, _, _ = mor_table(tmp_path, table_version=table_version)
    with pytest.raises(PlanNotFoundError, match="no compaction plan"):
        execute_compaction(spark, HudiTable.open(base), "20200101000000000")
    deltacommit = HudiTable.open(base).timeline().instants[-1].requested_time
    with pytest.raises(PlanNotFoundError):
        execute_compaction(spark, HudiTable.open(base), deltacommit)
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    execute_compaction(spark, HudiTable.open(base), instant)
    with pytest.raises(PlanNotFoundError, match="already completed"):
        execute_compaction(spark, HudiTable.open(base), instant)
