"""Clustering and compaction next to a writer updating their file groups (RFC-56 conflict
checks, RFC-79 cancels). A cancellable clustering finds the writer's commit before it writes
and cancels itself; the writer's commit lands. One that is not cancellable makes the writer
wait, and both land. A compaction that is not cancellable waits for a write in flight on its
file groups. hudi-rs reads every outcome."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import tms.services.execution as execution_module
import tms.services.plan_executor as executor_module
from tests import oracle
from tests.services.test_clustering import group_target, small_files_table, trips
from tms.hudi.errors import PlanCancelledError
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests, heartbeat
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import new_instant_time, request, transition
from tms.services.clustering.execute import execute_clustering, schedule_clustering
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.services.conflicts import ConflictCheck, WriteConflictError, find_conflicts
from tms.services.execution import resolve_conflicts
from tms.testing.sample_writer.writer import HudiWriter

pytestmark = [pytest.mark.spark]

UPDATED = range(0, 240, 3)


def ts_by_key(base: str) -> dict[str, int]:
    return {key: row["ts"] for key, row in oracle.rows_by_key(base).items()}


def test_a_cancellable_clustering_cancels_itself_for_a_writers_update(
    spark: Any, tmp_path: Path, table_version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=240, table_version=table_version)
    table = HudiTable.open(base)
    instant = schedule_clustering(table, target_file_size=group_target(base))
    assert instant is not None
    writer = HudiWriter(HudiTable.open(base), max_file_rows=60, locked=True)
    real = executor_module.run_tasks
    wrote: list[str] = []

    def writer_commits_first(*args: Any, **kwargs: Any) -> Any:
        wrote.append(writer.upsert(trips(UPDATED, ts=9)))  # the writer overtakes the plan
        return real(*args, **kwargs)

    monkeypatch.setattr(executor_module, "run_tasks", writer_commits_first)
    expected = {**ts_by_key(base), **{f"k{i:05d}": 9 for i in UPDATED}}
    with pytest.raises(PlanCancelledError, match="conflict with another writer") as cancelled:
        execute_clustering(spark, table, instant, heartbeat_interval=1)
    assert f"written by instant {wrote[0]}" in str(cancelled.value)

    timeline = HudiTable.open(base).timeline()
    assert timeline.get(instant).state is State.ABORTED  # type: ignore[union-attr]
    assert timeline.is_completed(wrote[0]), "the writer's commit lands"
    assert cancel_requests.cancel_requests(table.storage) == []
    assert ts_by_key(base) == expected


def test_a_clustering_that_is_not_cancellable_makes_the_writer_wait_and_both_land(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=table_version)
    table = HudiTable.open(base)
    instant = schedule_clustering(table, target_file_size=group_target(base), cancellable=False)
    assert instant is not None
    expected = {**ts_by_key(base), **{f"k{i:05d}": 9 for i in UPDATED}}
    writer = HudiWriter(HudiTable.open(base), max_file_rows=60, locked=True)
    wrote: list[str] = []
    failed: list[BaseException] = []

    def write() -> None:
        try:
            wrote.append(writer.upsert(trips(UPDATED, ts=9)))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=write)
    thread.start()  # it waits: the pending clustering is not cancellable
    result = execute_clustering(spark, table, instant, heartbeat_interval=1)
    thread.join(120)
    assert not failed, failed
    timeline = HudiTable.open(base).timeline()
    clustered = timeline.get(instant)
    written = timeline.get(wrote[0])
    assert clustered is not None and written is not None
    assert clustered.is_completed and written.is_completed and result.files_written > 0
    replaced = set(timeline.commit_metadata(clustered).partition_to_replace_file_ids["eu"])
    touched = {
        stat.file_id
        for stats in timeline.commit_metadata(written).partition_to_write_stats.values()
        for stat in stats
    }
    assert touched and not touched & replaced, "it wrote after the clustering, to new groups"
    assert ts_by_key(base) == expected


def in_flight_write(base: str, file_id: str, partition: str) -> str:
    """Another writer's instant, beating, with a merge marker on `file_id`."""
    table = HudiTable.open(base)
    ts = new_instant_time(table.timeline().instants)
    requested = request(table.storage, table.config, ts, Action.DELTA_COMMIT)
    transition(table.storage, table.config, requested, State.INFLIGHT)
    name = f"{file_id}_0-1-1_{ts}.parquet"
    create_marker(table.storage, ts, Marker(partition, name, MarkerType.MERGE))
    heartbeat.beat(table.storage, ts)
    return ts


def test_a_compaction_waits_for_a_write_in_flight_on_its_file_groups(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=9)
    before = oracle.snapshot(base)
    table = HudiTable.open(base)
    instant = schedule_compaction(table)
    assert instant is not None
    operation = table.timeline().compaction_plan(table.timeline().get(instant))["operations"][0]  # type: ignore[arg-type]
    other = in_flight_write(base, operation["fileId"], operation["partitionPath"])
    groups = {(operation["partitionPath"], operation["fileId"])}
    (conflict,) = find_conflicts(table, instant, groups, any_file=False)
    assert conflict.in_flight and conflict.instant == other
    waits: list[float] = []

    def writer_gives_up(seconds: float) -> None:  # the other writer stops (and is gone)
        waits.append(seconds)
        heartbeat.stop_heartbeat(table.storage, other)

    monkeypatch.setattr(execution_module, "_sleep", writer_gives_up)
    result = execute_compaction(spark, table, instant, heartbeat_interval=1)
    assert waits == [1.0] and result.files_written > 0
    assert HudiTable.open(base).timeline().is_completed(instant)
    assert oracle.snapshot(base).equals(before)


def test_a_compaction_that_is_not_cancellable_fails_for_a_completed_base_file_write(
    tmp_path: Path,
) -> None:
    """A write that made a new base file of a planned group after the plan: completing the
    plan would hide it, so the attempt fails for good, naming the writer and the group."""
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=9)
    table = HudiTable.open(base)
    instant = schedule_compaction(table)
    assert instant is not None
    operation = table.timeline().compaction_plan(table.timeline().get(instant))["operations"][0]  # type: ignore[arg-type]
    groups = frozenset({(operation["partitionPath"], operation["fileId"])})
    writer = HudiWriter(HudiTable.open(base), max_file_rows=60)
    appended = writer.upsert(trips(UPDATED, ts=9))  # log files only: no conflict
    assert find_conflicts(table, instant, groups, any_file=False) == []
    conflicts = find_conflicts(table, instant, groups, any_file=True)
    assert [c.instant for c in conflicts] == [appended] and not conflicts[0].in_flight
    check = ConflictCheck(base, instant, groups, any_file=True, cancellable=False, lock=table.lock)
    with pytest.raises(WriteConflictError, match=f"written by instant {appended}") as failed:
        resolve_conflicts(table, check, wait=True)
    assert failed.value.retryable is False
