"""Compacting the metadata table of real Hudi 1.1 tables: every metadata partition reads the
same records afterwards, each compacted file group is one base HFile, hudi-rs (planning from
the metadata table) reads the same rows and slices, and a crash mid-way is recovered."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests import oracle
from tests.hudi.test_fixture_views import (
    WITH_METADATA_TABLE,
    WITHOUT_METADATA_TABLE,
    unzip_fixture,
)
from typer.testing import CliRunner

from tms.cli import app
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.hfile import HFileReader
from tms.hudi.metadata.compaction import (
    CompactionTask,
    compaction_instant_time,
    execute_metadata_compaction,
    run_locally,
    schedule_metadata_compaction,
)
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.slice_reader import hfile_records
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import request
from tms.services.registry import table_service


@pytest.fixture(params=WITH_METADATA_TABLE)
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return unzip_fixture(request.param, tmp_path)


def all_records(root: Path) -> dict[str, dict[str, Any]]:
    reader = MetadataTableReader.open(Storage(str(root)))
    return {
        partition: {key: record.fields for key, record in reader.read_partition(partition).items()}
        for partition in reader.partitions
    }


def compact(root: Path) -> str:
    instant = schedule_metadata_compaction(Storage(str(root)))
    assert instant is not None
    execute_metadata_compaction(Storage(str(root)), instant)
    return instant


def test_compaction_keeps_every_record_and_leaves_one_base_file_per_group(table: Path) -> None:
    before = all_records(table)
    rows, slices = oracle.rows_by_key(str(table)), oracle.file_slices(str(table))
    instant = compact(table)

    assert all_records(table) == before
    assert sum(len(records) for records in before.values()) > 0
    reader = MetadataTableReader.open(Storage(str(table)))
    compacted = reader.timeline.get(instant)
    assert compacted is not None and compacted.action is Action.COMMIT and compacted.is_completed
    stats = [stat for _, stat in reader.timeline.commit_metadata(compacted).iter_write_stats()]
    compacted_groups = {stat.file_id for stat in stats}
    assert compacted_groups
    for partition in reader.partitions:
        stored: list[str] = []
        for file_slice in reader.file_slices(partition):
            assert file_slice.base_file is not None
            if file_slice.file_id in compacted_groups:
                assert file_slice.base_file.file_name.endswith(f"_{instant}.hfile")
            assert not file_slice.log_files
            hfile = HFileReader(reader.storage.read_bytes(file_slice.base_file.path))
            keys = [r.key for r in hfile_records(hfile)]
            assert keys == sorted(keys, key=str.encode)
            stored += keys
            assert hfile.file_info[b"minRecordKey"] == (keys[0] if keys else "").encode()
            assert hfile.file_info[b"maxRecordKey"] == (keys[-1] if keys else "").encode()
        assert sorted(stored) == sorted(before[partition])
    assert oracle.rows_by_key(str(table)) == rows
    assert oracle.file_slices(str(table)) == slices


def test_nothing_is_scheduled_when_no_group_has_log_files(table: Path) -> None:
    compact(table)
    assert schedule_metadata_compaction(Storage(str(table))) is None


def test_a_pending_data_instant_bounds_the_compaction_instant(table: Path) -> None:
    """A data instant pending but already in the metadata table gets compacted only later: the
    compaction instant is just before it, and its log files stay out of the plan."""
    reader = MetadataTableReader.open(Storage(str(table)))
    last = reader.timeline.completed((Action.DELTA_COMMIT,))[-1].requested_time
    pending_instant = reader.data_timeline.get(last)
    assert pending_instant is not None
    completed = reader.data_timeline.instants
    layout_file = next(
        p for p in (table / ".hoodie" / "timeline").iterdir() if p.name.startswith(f"{last}_")
    )
    layout_file.unlink()  # the data table's instant is pending again
    reader = MetadataTableReader.open(Storage(str(table)))
    assert len(reader.data_timeline.instants) == len(completed)
    instant = compaction_instant_time(reader)
    assert instant < last and instant.startswith(last[:12])
    scheduled = schedule_metadata_compaction(Storage(str(table)))
    assert scheduled == instant
    plan = MetadataTableReader.open(Storage(str(table))).timeline
    operations = plan.compaction_plan(Instant(instant, Action.COMPACTION, State.REQUESTED))
    assert all(
        f"_{last}.log" not in p for op in operations["operations"] for p in op["deltaFilePaths"]
    )


def test_a_pending_metadata_compaction_refuses_a_second_plan(table: Path) -> None:
    reader = MetadataTableReader.open(Storage(str(table)))
    request(reader.storage, reader.config, "20990101000000000", Action.COMPACTION, b"")
    with pytest.raises(UnsupportedTableError, match="metadata compaction is pending"):
        schedule_metadata_compaction(Storage(str(table)))


class Crash(Exception):
    pass


def crash_after_half(tasks: Sequence[CompactionTask]) -> list[WriteStat]:
    run_locally(tasks[: len(tasks) // 2])
    raise Crash


def test_a_crashed_compaction_is_rolled_back_from_its_markers_and_run_again(table: Path) -> None:
    before = all_records(table)
    storage = Storage(str(table))
    instant = schedule_metadata_compaction(storage)
    assert instant is not None
    with pytest.raises(Crash):
        execute_metadata_compaction(storage, instant, run=crash_after_half)
    partial = list((table / ".hoodie" / "metadata").glob(f"*/*_{instant}.hfile"))
    assert partial, "the crash left base files behind"
    assert all_records(table) == before  # an inflight compaction is invisible to readers

    result = execute_metadata_compaction(storage, instant)

    assert len(result.rolled_back) == 1
    reader = MetadataTableReader.open(storage)
    rollback = reader.timeline.get(result.rolled_back[0])
    assert rollback is not None and rollback.action is Action.ROLLBACK and rollback.is_completed
    written = list((table / ".hoodie" / "metadata").glob(f"*/*_{instant}.hfile"))
    assert len(written) == result.files_written
    assert all_records(table) == before
    assert not (table / ".hoodie" / "metadata" / ".hoodie" / ".temp" / instant).exists()


@pytest.mark.spark
@pytest.mark.parametrize("name", WITH_METADATA_TABLE)
def test_tms_run_metadata_compaction_on_spark(spark: Any, name: str, tmp_path: Path) -> None:
    root = unzip_fixture(name, tmp_path)
    before = all_records(root)
    rows, slices = oracle.rows_by_key(str(root)), oracle.file_slices(str(root))

    result = CliRunner().invoke(
        app, ["run", "metadata-compaction", "--base-path", str(root), "--json"]
    )

    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["action"] == "metadata-compaction" and figures["files_written"] > 0
    reader = MetadataTableReader.open(Storage(str(root)))
    done = reader.timeline.get(figures["instant"])
    assert done is not None and done.is_completed and reader.timeline.is_compaction(done)
    assert all(not s.log_files for p in reader.partitions for s in reader.file_slices(p))
    assert all_records(root) == before
    assert oracle.rows_by_key(str(root)) == rows
    assert oracle.file_slices(str(root)) == slices
    again = CliRunner().invoke(app, ["run", "metadata-compaction", "--base-path", str(root)])
    assert again.exit_code == 0 and "nothing to schedule" in again.output


@pytest.mark.parametrize("name", WITHOUT_METADATA_TABLE)
def test_a_table_without_metadata_table_has_nothing_to_compact(name: str, tmp_path: Path) -> None:
    """The policy may create the action for any table: the job does nothing and succeeds."""
    root = unzip_fixture(name, tmp_path)
    service = table_service("metadata-compaction")
    table = HudiTable.open(str(root))
    assert service.pending_plans(table) == []
    assert service.schedule(table, {}) is None
    result = CliRunner().invoke(app, ["run", "metadata-compaction", "--base-path", str(root)])
    assert result.exit_code == 0, result.output
    assert "nothing to schedule" in result.output
    assert not (root / ".hoodie" / "metadata").exists()
