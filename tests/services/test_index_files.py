"""Building the `files` partition, the metadata table itself, on tables without one: readers
planning from it (hudi-rs) read what listing storage reads, our `files` are the committed files
on storage, writers committing during the build are caught up (before the mark by the build's
catch-up, after it by themselves), a failed build leaves no metadata table, and the services
keep the new metadata table afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.hudi.test_fixture_views import unzip_fixture
from tests.hudi.test_indexing import files_of, own_table
from tests.hudi.test_writer import batch
from tests.hudi.test_writer_metadata_table import assert_metadata_table_true
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.clean.execute import execute_clean, schedule_clean
from tms.services.clustering.execute import execute_clustering, schedule_clustering
from tms.services.index import build as index
from tms.services.table_refusals import unsupported_features
from tms.testing.sample_writer.writer import HudiWriter

NO_METADATA_TABLE = ("cow_v9_txns_simple_nometa", "mor_avro_v9_txns_simple_nometa")


def assert_files_true(root: Path, tmp_path: Path) -> None:
    """hudi-rs planning from `files` reads what hudi-rs listing storage reads; our `files`
    are the committed files on storage and plan the same slices as listing; the services
    take the table."""
    assert "files" in TableConfig.load(Storage(str(root))).metadata_partitions
    assert_metadata_table_true(root, tmp_path)
    assert unsupported_features(HudiTable.open(str(root))) == []


def build_files(root: Path, on_stage: Any = None) -> str:
    table = HudiTable.open(str(root))
    instant_time = index.schedule(table, ["files"])
    assert instant_time is not None
    index.execute(None, table, instant_time, on_stage=on_stage)
    return instant_time


@pytest.mark.parametrize("fixture", NO_METADATA_TABLE)
def test_files_built_on_hudis_tables_read_as_listing_does(fixture: str, tmp_path: Path) -> None:
    root = unzip_fixture(fixture, tmp_path / "t")
    before = oracle.rows_by_key(str(root))
    instant_time = build_files(root)
    assert HudiTable.open(str(root)).timeline().is_completed(instant_time)
    assert oracle.rows_by_key(str(root)) == before
    assert_files_true(root, tmp_path)


def test_writers_committing_during_the_build_are_caught_up(tmp_path: Path) -> None:
    root = tmp_path / "t"
    own_table(root, ())  # no metadata table

    def write(stage: str) -> None:
        writer = HudiWriter(HudiTable.open(str(root)), max_file_rows=40)
        if stage == "build":  # before the mark: the catch-up applies these
            writer.insert(batch(range(100, 130), 5))
            writer.upsert(batch(range(10, 25), 6))
        elif stage == "catch-up":  # after the mark: the writer logs to `files` itself
            writer.upsert(batch(range(125, 140), 7))
            writer.delete(batch([2, 120], 8).select(["id", "ts", "city"]))

    instant_time = build_files(root, write)
    reader = MetadataTableReader.open(Storage(str(root)))
    delta_commits = {i.requested_time for i in reader.timeline.completed((Action.DELTA_COMMIT,))}
    data = [i.requested_time for i in HudiTable.open(str(root)).timeline().commits()]
    # the build's own delta commit, and one per data commit after it: caught up or logged
    assert instant_time in delta_commits
    assert set(data[-4:]) <= delta_commits
    assert not any(len(t) > 17 for t in delta_commits)  # hudi-rs reads 17-digit instants only
    assert_files_true(root, tmp_path)
    # the writer goes on keeping the metadata table
    HudiWriter(HudiTable.open(str(root))).upsert(batch(range(0, 8), 9))
    assert_files_true(root, tmp_path)


@pytest.mark.spark
def test_the_services_keep_the_built_metadata_table(spark: Any, tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_nometa", tmp_path / "t")
    build_files(root)
    before = oracle.rows_by_key(str(root))
    clustering = schedule_clustering(HudiTable.open(str(root)))
    assert clustering is not None
    execute_clustering(spark, HudiTable.open(str(root)), clustering, heartbeat_interval=0.01)
    clean = schedule_clean(HudiTable.open(str(root)), retained=1)
    if clean is not None:
        execute_clean(spark, HudiTable.open(str(root)), clean, heartbeat_interval=0.01)
    assert oracle.rows_by_key(str(root)) == before
    assert_files_true(root, tmp_path)


def test_a_failed_build_leaves_no_metadata_table_and_keeps_its_plan(tmp_path: Path) -> None:
    root = tmp_path / "t"
    own_table(root, ())
    before = files_of(root)
    table = HudiTable.open(str(root))
    instant_time = index.schedule(table, ["files"])
    assert instant_time is not None

    def fail(stage: str) -> None:
        if stage == "catch-up":
            raise RuntimeError("the executor was lost")

    with pytest.raises(RuntimeError):
        index.execute(None, table, instant_time, on_stage=fail)
    assert not (root / ".hoodie" / "metadata").exists()
    after = files_of(root)
    plan = f".hoodie/timeline/{instant_time}.indexing.requested"
    assert set(after) - set(before) == {plan}
    # the retry runs the plan again
    index.execute(None, HudiTable.open(str(root)), instant_time)
    assert_files_true(root, tmp_path)


def test_files_is_refused_with_other_partitions_or_over_a_stray_folder(tmp_path: Path) -> None:
    root = tmp_path / "t"
    own_table(root, ())
    table = HudiTable.open(str(root))
    with pytest.raises(UnsupportedTableError, match="files is built alone"):
        index.schedule(table, ["files", "record_index"])
    (root / ".hoodie" / "metadata" / ".hoodie").mkdir(parents=True)
    (root / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties").write_text("x=1\n")
    with pytest.raises(UnsupportedTableError, match="exists without a built files partition"):
        index.schedule(table, ["files"])
    v6 = tmp_path / "v6"
    own_table(v6, (), version=6)
    with pytest.raises(UnsupportedTableError, match="table version 6"):
        index.schedule(HudiTable.open(str(v6)), ["files"])
