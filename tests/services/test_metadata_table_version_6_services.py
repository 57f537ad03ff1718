"""Compaction, clustering and clean of table version 6 (Hudi 0.14/0.15) tables with a metadata
table: each service commits its metadata delta commit in layout 1 first, the metadata table's
`files`, column stats and record index read what storage holds afterwards, a crash between the
two commits recovers on rerun, and the metadata table's own compaction and clean follow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests import oracle
from tests.hudi.test_writer import batch
from tests.hudi.test_writer_metadata_table import assert_metadata_table_true, new_table
from tests.services.test_metadata_table_services import CRASHES, Crash
from tms.hudi.metadata.column_stats import column_stats_entries
from tms.hudi.metadata.index_defs import column_stats_columns
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.clean.execute import execute_clean, schedule_clean
from tms.services.clustering.execute import execute_clustering, schedule_clustering
from tms.services.metadata.clean import clean_metadata_table
from tms.services.registry import table_service
from tms.testing.sample_writer.writer import HudiWriter

pytestmark = [pytest.mark.spark]

PARTITIONS = ("files", "column_stats", "record_index")


def reader_of(root: Path) -> MetadataTableReader:
    return MetadataTableReader.open(Storage(str(root)))


def small_file_table(root: Path) -> None:
    """A version 6 copy-on-write table of many small file groups, so clustering has work."""
    writer = HudiWriter(new_table(root, COPY_ON_WRITE, 6, PARTITIONS).table, max_file_rows=8)
    writer.insert(batch(range(0, 40), 1))
    writer.upsert(batch(range(20, 60), 2))
    writer.delete(batch([3, 33], 3).select(["id", "ts", "city"]))


def assert_column_stats_true(root: Path) -> None:
    """Column stats of every latest base file are its footer's, over the columns Hudi 0.x
    indexes by default (version 6 tables carry no index definitions)."""
    hudi = HudiTable.open(str(root))
    schema = json.loads(hudi.timeline().latest_schema() or "{}")
    columns, version = column_stats_columns({}, schema)
    reader = reader_of(root)
    stats = reader.read_partition("column_stats")
    live: set[str] = set()
    for piece in hudi.file_system_view().latest_file_slices():
        assert piece.base_file is not None
        live.add(piece.base_file.file_name)
        footer = pq.ParquetFile(root / piece.base_file.path).metadata
        for key, payload in column_stats_entries(
            piece.partition_path, piece.base_file.file_name, footer, columns, version
        ):
            # the version 6 record has no `isTightBound` / `valueType` (Hudi 1.x added them)
            stored = stats[key].fields["ColumnStatsMetadata"]
            assert stored == {name: payload[name] for name in stored}
            assert set(payload) - set(stored) == {"isTightBound", "valueType"}
    for record in stats.values():
        payload = record.fields["ColumnStatsMetadata"]
        if not payload["isDeleted"]:
            assert payload["fileName"] in live or payload["fileName"] in {
                n for names in reader.all_files().values() for n in names
            }


def test_clean_then_clustering_keep_the_metadata_table_true(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    small_file_table(root)
    before = oracle.rows_by_key(str(root))

    clean = schedule_clean(HudiTable.open(str(root)), retained=1)
    assert clean is not None
    result = execute_clean(spark, HudiTable.open(str(root)), clean, heartbeat_interval=0.01)
    assert result.files_deleted > 0
    assert (root / ".hoodie" / "metadata" / ".hoodie" / f"{clean}.deltacommit").is_file()
    assert oracle.rows_by_key(str(root)) == before
    assert_metadata_table_true(root, tmp_path)
    assert_column_stats_true(root)

    clustering = schedule_clustering(HudiTable.open(str(root)))
    assert clustering is not None
    execute_clustering(spark, HudiTable.open(str(root)), clustering, heartbeat_interval=0.01)
    assert (root / ".hoodie" / "metadata" / ".hoodie" / f"{clustering}.deltacommit").is_file()
    assert oracle.rows_by_key(str(root)) == before
    assert_metadata_table_true(root, tmp_path)
    assert_column_stats_true(root)


@pytest.mark.parametrize("crash", sorted(CRASHES))
def test_a_crashed_clustering_recovers_on_rerun(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash: str
) -> None:
    root = tmp_path / "t"
    small_file_table(root)
    before = oracle.rows_by_key(str(root))
    clustering = schedule_clustering(HudiTable.open(str(root)))
    assert clustering is not None
    with monkeypatch.context() as patched:
        CRASHES[crash](patched)
        with pytest.raises(Crash):
            execute_clustering(
                spark, HudiTable.open(str(root)), clustering, heartbeat_interval=0.01
            )
    assert not HudiTable.open(str(root)).timeline().is_completed(clustering)
    assert oracle.rows_by_key(str(root)) == before

    execute_clustering(spark, HudiTable.open(str(root)), clustering, heartbeat_interval=0.01)

    assert HudiTable.open(str(root)).timeline().is_completed(clustering)
    mdt = reader_of(root).timeline
    assert [i.is_completed for i in mdt.instants if i.requested_time == clustering] == [True]
    assert all(i.is_completed for i in mdt.instants if i.action is Action.ROLLBACK)
    assert oracle.rows_by_key(str(root)) == before
    assert_metadata_table_true(root, tmp_path)
    assert_column_stats_true(root)


def test_the_metadata_table_compacts_and_cleans_itself(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    small_file_table(root)
    service = table_service("metadata-compaction")
    compaction = service.schedule(HudiTable.open(str(root)), {})
    assert compaction is not None and len(compaction) == 20 and compaction.endswith("001")
    service.execute(spark, HudiTable.open(str(root)), compaction, 60.0)
    assert (root / ".hoodie" / "metadata" / ".hoodie" / f"{compaction}.commit").is_file()
    assert_metadata_table_true(root, tmp_path)

    writer = HudiWriter(HudiTable.open(str(root)), max_file_rows=8)
    writer.upsert(batch(range(50, 70), 4))
    before = oracle.rows_by_key(str(root))
    cleaned = clean_metadata_table(spark, HudiTable.open(str(root)), retained=1)
    assert cleaned is not None and cleaned.files_deleted > 0
    # the slices the compaction replaced are gone; every latest slice stays
    for partition in PARTITIONS:
        for file_slice in reader_of(root).file_slices(partition):
            assert file_slice.base_instant_time == compaction
    leftovers = [
        p.name
        for p in (root / ".hoodie" / "metadata").glob("*/.*.log.*")
        if f"_{compaction}.log." not in p.name
    ]
    assert leftovers == []
    assert oracle.rows_by_key(str(root)) == before
    assert_metadata_table_true(root, tmp_path)
