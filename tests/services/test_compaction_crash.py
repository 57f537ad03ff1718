"""A compaction killed mid-way is rolled back and completes when run again."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import oracle
from tests.crash import has_markers, kill_tms_when, run_tms
from tests.services.test_compaction import batch
from tests.services.timeline_files import completed_rollback_files, instant_files
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.services.compaction.execute import schedule_compaction
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter


def new_base_files(base: str, instant: str) -> set[str]:
    """Base files the compaction at `instant` wrote, relative to the base path."""
    return {str(p.relative_to(base)) for p in Path(base).rglob(f"*_{instant}.parquet")}


def wrote_a_base_file(base: str, instant: str) -> Callable[[], bool]:
    markers = has_markers(base, instant)
    return lambda: markers() and bool(new_base_files(base, instant))


@pytest.mark.spark
def test_killed_compaction_is_rolled_back_and_completes_on_rerun(
    tmp_path: Path, table_version: int
) -> None:
    base = str(tmp_path / "trips")
    table = create_table(
        base,
        "trips",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=40)
    writer.insert(batch(range(600), ts=1))
    writer.upsert(batch(range(0, 600, 2), ts=2))
    writer.delete(batch(list(range(0, 600, 7)), ts=3).select(["id", "city"]))
    writer.upsert(batch(range(1, 600, 5), ts=4))
    before = oracle.snapshot(base)
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    timeline = HudiTable.open(base).timeline()
    operations = timeline.compaction_plan(timeline.pending_compactions()[0])["operations"]
    assert len(operations) >= 6

    args = ["run", "compaction", "--base-path", base, "--instant", instant]
    args += ["--master", "local[1]", "--heartbeat-interval", "1"]
    kill_tms_when(args, wrote_a_base_file(base, instant))
    partial = new_base_files(base, instant)
    assert partial and has_markers(base, instant)()
    killed = HudiTable.open(base).timeline().get(instant)
    assert killed is not None and killed.state is State.INFLIGHT

    time.sleep(2.5)  # the killed job's heartbeat (1 s × 2 misses) expires
    done = run_tms(args)
    assert done.returncode == 0, done.stderr[-3000:]

    assert oracle.snapshot(base).equals(before)
    assert not [s for s in oracle.file_slices(base) if s["log_files"]]
    timeline = HudiTable.open(base).timeline()
    completed = timeline.get(instant)
    assert completed is not None and completed.is_completed
    written = {s.path for s in timeline.commit_metadata(completed).write_stats()}
    assert len(written) == len(operations)
    assert new_base_files(base, instant) == written  # nothing of the killed attempt is left
    rollbacks = [
        timeline.avro_details(i, State.COMPLETED) or {}
        for i in timeline.completed((Action.ROLLBACK,))
    ]
    assert [r.get("commitsRollback") for r in rollbacks] == [[instant]]
    for rollback in timeline.completed((Action.ROLLBACK,)):  # named as the layout names it
        completion = rollback.completion_time if table_version >= 8 else None
        assert instant_files(base, rollback.requested_time) == completed_rollback_files(
            base, rollback.requested_time, completion
        )
    deleted = {
        path.removeprefix(base + "/")
        for r in rollbacks
        for p in r["partitionMetadata"].values()
        for path in p["successDeleteFiles"]
    }
    assert partial <= deleted
    assert not list(Path(base).rglob("*.tmp"))
