"""A clustering job killed mid-way: the next run rolls back its files and clusters again."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests import oracle
from tests.crash import has_markers, kill_tms_when, run_tms
from tests.services.test_clustering import (
    group_target,
    plan_of,
    planned_file_ids,
    small_files_table,
)
from tests.services.timeline_files import completed_rollback_files, instant_files
from tms.hudi.files.markers import TEMP_FOLDER
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.clustering.execute import schedule_clustering

HEARTBEAT_INTERVAL = 1


@pytest.mark.spark
def test_killed_clustering_is_rolled_back_and_run_again(tmp_path: Path, table_version: int) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, table_version=table_version)
    before = oracle.snapshot(base)
    slices_before = oracle.file_slices(base)
    instant = schedule_clustering(HudiTable.open(base), target_file_size=group_target(base, 2))
    assert instant is not None
    groups = plan_of(base, instant)["clusteringPlan"]["inputGroups"]
    assert len(groups) >= 4, "several Spark tasks, so the kill lands between them"
    args = [
        "run",
        "clustering",
        "--base-path",
        base,
        "--instant",
        instant,
        "--master",
        "local[1]",
        "--heartbeat-interval",
        str(HEARTBEAT_INTERVAL),
    ]
    marked = has_markers(base, instant)

    def new_file_written() -> bool:
        return marked() and any(Path(base).rglob(f"*_{instant}.parquet"))

    kill_tms_when(args, new_file_written)

    killed_files = set(Path(base).rglob(f"*_{instant}.parquet"))
    assert killed_files, "the killed attempt left partial output"
    timeline = HudiTable.open(base).timeline()
    assert not timeline.is_completed(instant)
    assert oracle.snapshot(base).equals(before), "readers never see the partial output"
    time.sleep(HEARTBEAT_INTERVAL * 2 + 1.5)  # the dead job's heartbeat expires

    done = run_tms([*args, "--json"])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["state"] == "COMPLETED"
    assert len(result["rolled_back"]) == 1

    assert oracle.snapshot(base).equals(before)
    slices_after = oracle.file_slices(base)
    assert len(slices_after) < len(slices_before)
    assert not planned_file_ids(base, instant) & {s["file_id"] for s in slices_after}
    assert (instant, "replacecommit") in oracle.completed_instants(base)
    assert not any(path.exists() for path in killed_files)
    written = {s["base_file"] for s in slices_after if s["base_instant"] == instant}
    assert written == {p.name for p in Path(base).rglob(f"*_{instant}.parquet")}
    assert not (Path(base) / TEMP_FOLDER / instant).exists()
    timeline = HudiTable.open(base).timeline()
    rollback = timeline.get(result["rolled_back"][0])
    assert rollback is not None and rollback.action is Action.ROLLBACK and rollback.is_completed
    completion = rollback.completion_time if table_version >= 8 else None
    assert instant_files(base, rollback.requested_time) == completed_rollback_files(
        base, rollback.requested_time, completion
    )
