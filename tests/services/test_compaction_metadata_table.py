"""Compaction of our own merge-on-read tables with a metadata table: the writer keeps the
metadata table in step with its upserts into log files, `tms run compaction` commits the
compacted base files to it, and readers planning from it read what listing storage reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests import oracle
from tests.hudi.test_writer import batch
from tests.hudi.test_writer_metadata_table import assert_metadata_table_true, new_table
from tms.cli import app
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action

pytestmark = [pytest.mark.spark]


@pytest.mark.parametrize("version", [6, 8, 9])
def test_compaction_of_a_table_the_writer_keeps_a_metadata_table_for(
    tmp_path: Path, version: int
) -> None:
    root = tmp_path / "t"
    writer = new_table(root, MERGE_ON_READ, version, ("files", "record_index"))
    writer.insert(batch(range(0, 60), 1))
    writer.upsert(batch(range(30, 70), 2))
    writer.delete(batch([5, 35], 3).select(["id", "ts", "city"]))
    before = oracle.rows_by_key(str(root))
    keys = sorted(before)
    locations_before = MetadataTableReader.open(Storage(str(root))).record_locations(keys)

    result = CliRunner().invoke(
        app, ["run", "compaction", "--base-path", str(root), "--master", "local[1]"]
    )
    assert result.exit_code == 0, result.output

    timeline = HudiTable.open(str(root)).timeline()
    compaction = timeline.completed((Action.COMMIT,))[-1]
    reader = MetadataTableReader.open(Storage(str(root)))
    assert reader.timeline.instants[-1].requested_time == compaction.requested_time
    slices = HudiTable.open(str(root)).file_system_view().latest_file_slices()
    assert any(s.base_instant_time == compaction.requested_time for s in slices)
    assert all(not s.log_files for s in slices)
    assert oracle.rows_by_key(str(root)) == before
    # compaction keeps every record where it was: the record index is unchanged
    located = reader.record_locations(keys)
    assert {k: (v.partition_path, v.file_id) for k, v in located.items()} == {
        k: (v.partition_path, v.file_id) for k, v in locations_before.items()
    }
    assert_metadata_table_true(root, tmp_path)
    # the writer goes on after the compaction, on the compacted slices
    writer = type(writer)(HudiTable.open(str(root)), max_file_rows=40)
    writer.upsert(batch(range(60, 80), 4))
    assert_metadata_table_true(root, tmp_path)
