"""The metadata table's own clean after its compaction: the older file slices a compaction
leaves behind go, everything the metadata table holds reads the same, and readers planning
from it (hudi-rs) read what listing storage reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.hudi.test_writer import batch
from tests.hudi.test_writer_metadata_table import assert_metadata_table_true, new_table
from tms.hudi.avro import codec as avro_codec
from tms.hudi.errors import PlanCompletedError
from tms.hudi.metadata.compaction import (
    execute_metadata_compaction,
    schedule_metadata_compaction,
)
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.services.clean.plan import KEEP_LATEST_COMMITS, schedule_clean
from tms.services.metadata.clean import (
    METADATA_CLEANER_COMMITS_RETAINED,
    MetadataTable,
    clean_metadata_table,
)
from tms.services.registry import table_service

pytestmark = [pytest.mark.spark]


def metadata_records(root: Path) -> dict[str, dict[str, Any]]:
    reader = MetadataTableReader.open(Storage(str(root)))
    return {
        partition: {key: record.fields for key, record in reader.read_partition(partition).items()}
        for partition in reader.partitions
    }


def metadata_files(root: Path) -> set[str]:
    folder = root / ".hoodie" / "metadata"
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and ".hoodie" not in p.relative_to(folder).parts
    }


def test_the_clean_after_a_metadata_compaction_deletes_only_older_slices(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    writer = new_table(root, MERGE_ON_READ, 9, ("files", "record_index"))
    writer.insert(batch(range(0, 40), 1))
    writer.upsert(batch(range(20, 50), 2))
    service = table_service("metadata-compaction")
    table = HudiTable.open(str(root))
    compaction = service.schedule(table, {})
    assert compaction is not None
    first = service.execute(spark, table, compaction, 60.0)
    # Hudi's retention (METADATA_CLEANER_COMMITS_RETAINED, 20 commits) keeps every slice of
    # so young a table
    assert first.files_deleted == 0
    files_after_compaction = metadata_files(root)

    writer = type(writer)(HudiTable.open(str(root)), max_file_rows=40)
    writer.upsert(batch(range(30, 60), 3))
    writer.delete(batch([3, 33], 4).select(["id", "ts", "city"]))
    before_records = metadata_records(root)
    before_rows = oracle.rows_by_key(str(root))
    reader = MetadataTableReader.open(Storage(str(root)))
    latest = {
        path
        for partition in reader.partitions
        for file_slice in reader.file_slices(partition)
        for path in file_slice.paths
    }

    cleaned = clean_metadata_table(spark, HudiTable.open(str(root)), retained=1)

    assert cleaned is not None and cleaned.files_deleted > 0
    remaining = metadata_files(root)
    gone = files_after_compaction - remaining
    # exactly the slices older than the compaction went: every latest slice file stays
    assert len(gone) == cleaned.files_deleted
    assert {
        p for p in latest if p.rsplit("/", 1)[-1] in {g.rsplit("/", 1)[-1] for g in gone}
    } == set()
    assert all(f"_{compaction}." not in g and f"_{compaction}_" not in g for g in gone)
    assert metadata_records(root) == before_records
    assert oracle.rows_by_key(str(root)) == before_rows
    assert_metadata_table_true(root, tmp_path)
    reader = MetadataTableReader.open(Storage(str(root)))
    clean = reader.timeline.instants[-1]
    assert clean.action is Action.CLEAN and clean.is_completed
    metadata = avro_codec.decode(reader.timeline.read_instant(clean, State.COMPLETED))
    recorded = {
        name for p in metadata["partitionMetadata"].values() for name in p["successDeleteFiles"]
    }
    assert recorded == {g.rsplit("/", 1)[-1] for g in gone}
    # nothing is left to clean
    assert clean_metadata_table(spark, HudiTable.open(str(root)), retained=1) is None


def test_a_retry_after_the_metadata_compaction_committed_finishes_its_clean(
    spark: Any, tmp_path: Path
) -> None:
    """A job killed after the metadata compaction committed, its clean planned but not run:
    the retry finds the compaction done, and finishes the clean before it says so, leaving
    no clean pending on the metadata table."""
    root = tmp_path / "t"
    storage = Storage(str(root))
    writer = new_table(root, MERGE_ON_READ, 9, ("files", "record_index"))
    writer.insert(batch(range(0, 40), 1))
    writer.upsert(batch(range(20, 50), 2))
    first = schedule_metadata_compaction(storage)
    assert first is not None
    execute_metadata_compaction(storage, first)
    for n in range(METADATA_CLEANER_COMMITS_RETAINED + 1):  # the older slices age out
        writer = type(writer)(HudiTable.open(str(root)), max_file_rows=40)
        writer.upsert(batch(range(n, 50, 7), 3 + n))
    second = schedule_metadata_compaction(storage)
    assert second is not None
    execute_metadata_compaction(storage, second)
    pending_clean = schedule_clean(
        MetadataTable.of(HudiTable.open(str(root))),
        policy=KEEP_LATEST_COMMITS,
        retained=METADATA_CLEANER_COMMITS_RETAINED,
    )
    assert pending_clean is not None
    before_rows = oracle.rows_by_key(str(root))

    with pytest.raises(PlanCompletedError):
        table_service("metadata-compaction").execute(spark, HudiTable.open(str(root)), second, 60.0)

    timeline = MetadataTableReader.open(storage).timeline
    assert timeline.pending([Action.CLEAN]) == []
    done = timeline.get(pending_clean)
    assert done is not None and done.is_completed
    assert timeline.clean_metadata(done)["totalFilesDeleted"] > 0
    assert oracle.rows_by_key(str(root)) == before_rows
    assert_metadata_table_true(root, tmp_path)
