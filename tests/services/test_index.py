"""The `indexing` service end to end on Spark: a record index built on Hudi's own table equals
the one Hudi wrote; writers committing while it is built are caught up; a cancel leaves no
trace, a failure or a timeout keeps only the plan for the retry; a crashed build is aborted and
run again; drop."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest.mock import Mock

import pyarrow.parquet as pq
import pytest

import tms.services.index.build as index
from tests import oracle
from tests.hudi.test_fixture_views import (
    WITH_METADATA_TABLE,
    unzip_fixture,
    without_metadata_table,
)
from tests.hudi.test_indexing import files_of, own_table, record_index_is_true
from tests.hudi.test_writer import batch
from tms.hudi.errors import InstantInFlightError, UnsupportedTableError
from tms.hudi.metadata.column_stats import column_stats_entries
from tms.hudi.metadata.index_defs import read_index_definitions
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.rollback_instant import RollbackInstant
from tms.hudi.timeline.transitions import new_instant_time, request
from tms.services.registry import table_service
from tms.services.table_refusals import unsupported_features
from tms.testing.sample_writer.writer import HudiWriter

FIXTURE = "cow_v9_txns_simple_meta"
PROPERTIES = Path(".hoodie") / "hoodie.properties"


def without_partition(root: Path, partition: str) -> Path:
    """The table as if `partition` had never been built: folder and config entry gone."""
    shutil.rmtree(root / ".hoodie" / "metadata" / partition)
    properties = root / PROPERTIES
    text = properties.read_text()
    listed = re.search(r"(?m)^hoodie\.table\.metadata\.partitions=(.*)$", text)
    assert listed is not None
    kept = ",".join(p for p in listed.group(1).split(",") if p != partition)
    properties.write_text(text.replace(listed.group(0), f"hoodie.table.metadata.partitions={kept}"))
    return root


def hudi_rs_rows(root: Path, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """hudi-rs's rows planned from the metadata table, checked equal to its rows by listing."""
    listed = tmp_path / f"listed-{len(list(tmp_path.glob('listed-*')))}"
    shutil.copytree(root, listed)
    by_listing = oracle.rows_by_key(str(without_metadata_table(listed)))
    rows = oracle.rows_by_key(str(root))
    assert rows == by_listing
    return rows


def locations(root: Path) -> dict[str, tuple[str, str]]:
    reader = MetadataTableReader.open(Storage(str(root)))
    keys = list(oracle.rows_by_key(str(root)))
    return {k: (v.partition_path, v.file_id) for k, v in reader.record_locations(keys).items()}


def stripped_fixture(tmp_path: Path, fixture: str = FIXTURE) -> Path:
    return without_partition(unzip_fixture(fixture, tmp_path / "stripped"), "record_index")


class Cancelled(Exception):
    """What a job's cancel raises into the execution."""


def raise_at(stage: str) -> Callable[[str], None]:
    def on_stage(entered: str) -> None:
        if entered == stage:
            raise Cancelled(stage)

    return on_stage


# The record index of Hudi's own table -----------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("fixture", WITH_METADATA_TABLE)
def test_a_record_index_built_on_hudis_table_equals_the_one_hudi_wrote(
    spark: Any, tmp_path: Path, fixture: str
) -> None:
    truth = locations(unzip_fixture(fixture, tmp_path / "untouched"))
    root = stripped_fixture(tmp_path, fixture)
    rows = hudi_rs_rows(root, tmp_path)
    table = HudiTable.open(str(root))
    instant_time = index.schedule(table, ["record_index"])
    assert instant_time is not None
    up_to = table.timeline().commits()[-1].requested_time
    stages: list[str] = []
    result = index.execute(spark, table, instant_time, on_stage=stages.append)

    assert stages == ["build", "catch-up", "complete"]
    assert result.records_written == len(truth) and result.file_groups > 0
    config = HudiTable.open(str(root)).config
    assert "record_index" in config.metadata_partitions
    assert config.get("hoodie.table.metadata.partitions.inflight") == ""
    timeline = HudiTable.open(str(root)).timeline()
    done = timeline.get(instant_time)
    assert done is not None and done.action is Action.INDEXING and done.is_completed
    assert timeline.avro_details(done, State.COMPLETED) == {
        "version": 1,
        "operationType": None,
        "indexPartitionInfos": [
            {
                "version": 1,
                "metadataPartitionPath": "record_index",
                "indexUptoInstant": up_to,
                "extraMetadata": None,
            }
        ],
    }
    assert locations(root) == truth
    assert hudi_rs_rows(root, tmp_path) == rows
    assert unsupported_features(HudiTable.open(str(root))) == []


# Writers while the index is built ---------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("version", [9, 6])
def test_writers_committing_during_the_build_are_caught_up(
    spark: Any, tmp_path: Path, version: int
) -> None:
    root = tmp_path / "t"
    own_table(root, version=version)  # a metadata table of `files` only
    table = HudiTable.open(str(root))
    instant_time = index.schedule(table, "record_index")
    assert instant_time is not None

    def write(stage: str) -> None:
        writer = HudiWriter(HudiTable.open(str(root)), max_file_rows=40)
        if stage == "build":  # before the mark: the catch-up applies these
            writer.insert(batch(range(100, 130), 5))
            writer.upsert(batch(range(10, 25), 6))
            writer.delete(batch([0, 11, 101], 7).select(["id", "ts", "city"]))
        elif stage == "catch-up":  # after the mark: the writer logs to the new partition
            writer.upsert(batch(range(125, 140), 8))
            writer.delete(batch([2, 120], 9).select(["id", "ts", "city"]))

    index.execute(spark, table, instant_time, on_stage=write)

    assert "record_index" in HudiTable.open(str(root)).config.metadata_partitions
    record_index_is_true(root)
    reader = MetadataTableReader.open(Storage(str(root)))
    gone = ["k0000", "k0011", "k0101", "k0002", "k0120"]
    assert reader.record_locations(gone) == {}
    assert {"k0139", "k0129", "k0024"} <= set(reader.record_locations(["k0139", "k0129", "k0024"]))
    rows = hudi_rs_rows(root, tmp_path)
    assert not set(gone) & set(rows) and {"k0139", "k0129"} <= set(rows)
    # the writer goes on keeping the built index
    HudiWriter(HudiTable.open(str(root))).upsert(batch(range(138, 150), 10))
    record_index_is_true(root)
    if version == 6:  # version 6 keeps no index definitions; its log files name their slice
        assert not (root / ".hoodie" / ".index_defs").exists()
        logs = [p.name for p in (root / ".hoodie" / "metadata" / "record_index").glob(".*.log.*")]
        assert logs and all(f"_{instant_time}.log." in name for name in logs)


def column_stats_are_true(root: Path) -> None:
    """Every latest base file's stats are what its footer gives; none of files gone from
    storage (older versions stay indexed until a clean deletes them)."""
    table = HudiTable.open(str(root))
    reader = MetadataTableReader.open(table.storage)
    definition = reader.index_definitions["column_stats"]
    live = {name for names in reader.all_files().values() for name in names}
    for piece in table.file_system_view().latest_file_slices():
        if piece.base_file is None:
            continue
        footer = pq.ParquetFile(root / piece.base_file.path).metadata
        for key, payload in column_stats_entries(
            piece.partition_path,
            piece.base_file.file_name,
            footer,
            definition.source_fields,
            definition.version,
        ):
            assert (
                reader.lookup("column_stats", [key])[key].fields["ColumnStatsMetadata"] == payload
            )
    for record in reader.read_partition("column_stats").values():
        payload = record.fields["ColumnStatsMetadata"]
        assert payload["isDeleted"] or payload["fileName"] in live, payload["fileName"]


@pytest.mark.spark
def test_column_stats_built_while_writers_commit(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    own_table(root)
    table = HudiTable.open(str(root))
    instant_time = index.schedule(table, ["column_stats"])
    assert instant_time is not None

    def write(stage: str) -> None:
        writer = HudiWriter(HudiTable.open(str(root)), max_file_rows=40)
        if stage == "build":
            writer.upsert(batch(range(5, 15), 5))
        elif stage == "catch-up":
            writer.upsert(batch(range(30, 50), 6))

    index.execute(spark, table, instant_time, on_stage=write)
    assert "column_stats" in HudiTable.open(str(root)).config.metadata_partitions
    column_stats_are_true(root)
    HudiWriter(HudiTable.open(str(root))).upsert(batch(range(0, 8), 7))
    column_stats_are_true(root)
    hudi_rs_rows(root, tmp_path)


# Abort -----------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("stage", ["build", "catch-up"])
def test_a_cancel_before_the_catch_up_leaves_no_trace(
    spark: Any, tmp_path: Path, stage: str
) -> None:
    root = stripped_fixture(tmp_path)
    before = files_of(root)
    table = HudiTable.open(str(root))
    instant_time = index.schedule(table, ["record_index"])
    assert instant_time is not None
    with pytest.raises(Cancelled):
        index.execute(spark, table, instant_time, on_stage=raise_at(stage))
    # the execution undoes its work and keeps the plan (a failure's retry runs it again) ...
    left = files_of(root)
    assert set(left) - set(before) == {f".hoodie/timeline/{instant_time}.indexing.requested"}
    assert {k: v for k, v in left.items() if k in before} == before
    # ... and the job's clean-up after a cancel removes the plan as well
    index.discard(HudiTable.open(str(root)), instant_time)
    assert files_of(root) == before


def own_table_before(tmp_path: Path) -> tuple[Path, HudiWriter, dict[str, str]]:
    """Our table (a metadata table of `files`) and its files before anything is scheduled."""
    root = tmp_path / "t"
    writer = own_table(root)
    return root, writer, files_of(root)


def scheduled(table: HudiTable, partitions: str = "record_index") -> str:
    instant_time = index.schedule(table, partitions)
    assert instant_time is not None
    return instant_time


@pytest.mark.spark
def test_instants_still_pending_at_the_timeout_undo_the_build_and_keep_its_plan(
    spark: Any, tmp_path: Path
) -> None:
    root, writer, before = own_table_before(tmp_path)
    table = HudiTable.open(str(root))
    instant_time = scheduled(table)
    stuck: list[str] = []

    def start_a_write(stage: str) -> None:
        if stage == "build":  # a writer's instant, requested before the mark and never ended
            stuck.append(new_instant_time(HudiTable.open(str(root)).timeline().instants))
            request(writer.storage, writer.config, stuck[0], Action.COMMIT)

    with pytest.raises(index.CatchUpTimeoutError, match="still pending"):
        index.execute(spark, table, instant_time, on_stage=start_a_write, catch_up_timeout=0)
    after = files_of(root)
    del after[f".hoodie/timeline/{stuck[0]}.commit.requested"]
    plan = f".hoodie/timeline/{instant_time}.indexing.requested"
    assert set(after) - set(before) == {plan}
    assert {k: v for k, v in after.items() if k != plan} == before
    # once the writer is done, the retry runs the kept plan to completion
    (root / ".hoodie" / "timeline" / f"{stuck[0]}.commit.requested").unlink()
    index.execute(spark, HudiTable.open(str(root)), instant_time)
    assert "record_index" in TableConfig.load(Storage(str(root))).metadata_partitions
    assert HudiTable.open(str(root)).timeline().is_completed(instant_time)


@pytest.mark.spark
def test_a_rollback_of_a_completed_instant_during_the_build_aborts_it(
    spark: Any, tmp_path: Path
) -> None:
    root, writer, before = own_table_before(tmp_path)
    table = HudiTable.open(str(root))
    instant_time = scheduled(table)
    undone = table.timeline().commits()[-1].requested_time
    rollbacks: list[str] = []

    def roll_back_a_commit(stage: str) -> None:
        if stage == "build":
            rollback_time = new_instant_time(HudiTable.open(str(root)).timeline().instants)
            rollback = RollbackInstant(
                writer.storage, writer.config, rollback_time, (undone, Action.COMMIT), {}
            )
            rollback.start()
            rollback.complete()
            rollbacks.append(rollback_time)

    with pytest.raises(index.IndexAbortedError, match=f"undid completed instant\\(s\\) {undone}"):
        index.execute(spark, table, instant_time, on_stage=roll_back_a_commit)
    after = files_of(root)
    added = {name for name in set(after) - set(before) if rollbacks[0] in name}
    assert len(added) == 3  # the rollback's requested, inflight and completed files
    assert {k: v for k, v in after.items() if k not in added} == before


# Crash recovery ----------------------------------------------------------------------------


@pytest.mark.spark
def test_a_build_left_inflight_by_a_crash_is_aborted_and_run_again(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    truth = locations(unzip_fixture(FIXTURE, tmp_path / "untouched"))
    root = stripped_fixture(tmp_path)
    table = HudiTable.open(str(root))
    instant_time = index.schedule(table, ["record_index"])
    assert instant_time is not None
    with monkeypatch.context() as crash:  # the process dies: nothing is aborted
        crash.setattr(index, "abort_indexing", lambda *args, **kwargs: None)
        with pytest.raises(Cancelled):
            index.execute(spark, table, instant_time, on_stage=raise_at("catch-up"))
    left = HudiTable.open(str(root))
    assert left.config.get("hoodie.table.metadata.partitions.inflight") == "record_index"
    assert index.pending_plans(left) == [instant_time]
    assert "being built by indexing " + instant_time in "; ".join(unsupported_features(left))

    result = table_service("indexing").execute(spark, left, instant_time, 60.0)

    assert result.rolled_back == [instant_time]
    assert index.pending_plans(HudiTable.open(str(root))) == []
    assert "record_index" in HudiTable.open(str(root)).config.metadata_partitions
    assert locations(root) == truth


@pytest.mark.spark
def test_a_build_that_crashed_after_listing_its_partitions_built_is_completed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tms.hudi.metadata.indexing as indexing

    root = stripped_fixture(tmp_path)
    table = HudiTable.open(str(root))
    instant_time = scheduled(table)
    up_to = table.timeline().commits()[-1].requested_time
    with monkeypatch.context() as crash:  # dies right before the completed instant
        crash.setattr(indexing, "transition", Mock(side_effect=Cancelled("crash")))
        with pytest.raises(Cancelled):
            index.execute(spark, table, instant_time)
    left = HudiTable.open(str(root))
    assert "record_index" in left.config.metadata_partitions
    assert index.pending_plans(left) == [instant_time]

    stages: list[str] = []
    result = index.execute(spark, left, instant_time, on_stage=stages.append)

    assert stages == ["complete"] and result.rolled_back == []
    timeline = HudiTable.open(str(root)).timeline()
    done = timeline.get(instant_time)
    assert done is not None and done.is_completed
    details = timeline.avro_details(done, State.COMPLETED)
    assert details is not None
    assert [i["indexUptoInstant"] for i in details["indexPartitionInfos"]] == [up_to]


def test_a_plan_the_table_no_longer_allows_is_refused_and_removed(tmp_path: Path) -> None:
    root, _, before = own_table_before(tmp_path)
    instant_time = scheduled(HudiTable.open(str(root)))
    properties = root / PROPERTIES
    properties.write_text(
        properties.read_text().replace(
            "hoodie.table.metadata.partitions.inflight=",
            "hoodie.table.metadata.partitions.inflight=bloom_filters",
        )
    )
    with pytest.raises(UnsupportedTableError, match="bloom_filters are being built by another"):
        index.execute(None, HudiTable.open(str(root)), instant_time)
    assert index.pending_plans(HudiTable.open(str(root))) == []
    after = files_of(root)
    assert after.pop(str(PROPERTIES)) != before.pop(str(PROPERTIES))  # only the inflight list
    assert after == before


def test_a_live_heartbeat_refuses_a_second_run(tmp_path: Path) -> None:
    writer = own_table(tmp_path / "t")
    table = HudiTable.open(str(tmp_path / "t"))
    instant_time = index.schedule(table, ["record_index"])
    assert instant_time is not None
    heartbeat.beat(writer.storage, instant_time)
    with pytest.raises(InstantInFlightError, match=instant_time):
        index.execute(None, table, instant_time)


# Drop ------------------------------------------------------------------------------------------


def test_drop_through_the_service_on_the_fixture(tmp_path: Path) -> None:
    root = unzip_fixture(FIXTURE, tmp_path / "fx")
    rows = hudi_rs_rows(root, tmp_path)
    service = table_service("indexing")
    drop_record_index = {"partitions": ["record_index"], "drop": True}
    with pytest.raises(ValueError, match="done at once, not planned"):
        service.schedule(HudiTable.open(str(root)), drop_record_index)
    assert service.run_direct_work(HudiTable.open(str(root)), drop_record_index) == {
        "dropped": "record_index"
    }
    assert service.run_direct_work(
        HudiTable.open(str(root)), {"partitions": "column_stats,partition_stats", "drop": True}
    ) == {"dropped": "column_stats,partition_stats"}
    table = HudiTable.open(str(root))
    assert not {"record_index", "column_stats", "partition_stats"} & set(
        table.config.metadata_partitions
    )
    definitions = read_index_definitions(table.storage, table.config)
    assert not {"record_index", "column_stats"} & set(definitions)
    for gone in ("record_index", "column_stats", "partition_stats"):
        assert not (root / ".hoodie" / "metadata" / gone).exists()
    assert hudi_rs_rows(root, tmp_path) == rows
    assert index.pending_plans(table) == []
    assert unsupported_features(table) == []


def test_drop_through_the_service_on_our_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    own_table(root, ("files", "column_stats", "record_index"))
    rows = hudi_rs_rows(root, tmp_path)
    index.drop(HudiTable.open(str(root)), ["column_stats"])
    index.drop(HudiTable.open(str(root)), ["record_index"])
    table = HudiTable.open(str(root))
    assert table.config.metadata_partitions == ["files"]
    assert read_index_definitions(table.storage, table.config) == {}
    assert hudi_rs_rows(root, tmp_path) == rows
    with pytest.raises(UnsupportedTableError, match="record_index is not built"):
        index.drop(table, ["record_index"])
