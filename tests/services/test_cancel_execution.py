"""Executions of cancellable plans stop at a cancel request (RFC-79): before they start, in
each Spark task before its file group, and at the pre-commit check. Whatever they wrote is
rolled back, the plan ends aborted, and readers (hudi-rs; with a metadata table, planning
from it and by listing alike) read the table as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tms.services.plan_executor as executor_module
from tests import oracle
from tests.services.test_clustering import group_target, small_files_table
from tests.services.test_metadata_table_services import (
    assert_metadata_table_true,
    copy_of,
    rows,
)
from tms.hudi.errors import PlanCancelledError
from tms.hudi.files.markers import TEMP_FOLDER
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.hudi.timeline.instant import Action, State
from tms.services.clustering.execute import execute_clustering, schedule_clustering
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.services.plan_cancel import request_cancel

pytestmark = [pytest.mark.spark]

RunTasks = Callable[..., Any]


def data_files_of(base: str, instant: str) -> list[str]:
    """Data files named by `instant` anywhere in the table's partitions."""
    return sorted(
        str(p.relative_to(base))
        for p in Path(base).rglob(f"*{instant}*")
        if ".hoodie" not in p.parts and p.is_file()
    )


def cancelling(when: str, table: HudiTable, instant: str, real: RunTasks) -> RunTasks:
    """`run_tasks` with a cancel requested on the table `before` the tasks run (each task
    finds it) or `after` they wrote their files (the pre-commit check finds it)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        if when == "before":
            request_cancel(table, instant)
        outcomes = real(*args, **kwargs)
        if when == "after":
            request_cancel(table, instant)
        return outcomes

    return run


def assert_aborted(base: str, instant: str) -> None:
    table = HudiTable.open(base)
    aborted = table.timeline().get(instant)
    assert aborted is not None and aborted.state is State.ABORTED
    assert data_files_of(base, instant) == [], "the plan's files are rolled back"
    assert cancel_requests.cancel_requests(table.storage) == [], "the request is done with"
    assert not (Path(base) / TEMP_FOLDER / instant).exists()


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_clustering_cancelled_while_it_runs_is_aborted(
    spark: Any,
    tmp_path: Path,
    table_version: int,
    when: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=480, table_version=table_version)
    before, slices = oracle.snapshot(base), oracle.file_slices(base)
    table = HudiTable.open(base)
    instant = schedule_clustering(table, target_file_size=group_target(base))
    assert instant is not None
    real = executor_module.run_tasks
    monkeypatch.setattr(executor_module, "run_tasks", cancelling(when, table, instant, real))

    with pytest.raises(PlanCancelledError, match="a cancel was requested"):
        execute_clustering(spark, table, instant, heartbeat_interval=1)

    assert_aborted(base, instant)
    assert oracle.snapshot(base).equals(before)
    assert oracle.file_slices(base) == slices
    rollbacks = HudiTable.open(base).timeline().completed((Action.ROLLBACK,))
    assert len(rollbacks) == 1, "the rollback of the partial files is on the timeline"


def test_a_plan_cancelled_before_it_starts_writes_nothing(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=240, table_version=table_version)
    before = oracle.snapshot(base)
    table = HudiTable.open(base)
    instant = schedule_clustering(table, target_file_size=group_target(base))
    assert instant is not None
    request_cancel(table, instant)
    with pytest.raises(PlanCancelledError):
        execute_clustering(spark, table, instant, heartbeat_interval=1)
    assert_aborted(base, instant)
    assert HudiTable.open(base).timeline().completed((Action.ROLLBACK,)) == []
    assert oracle.snapshot(base).equals(before)
    with pytest.raises(PlanCancelledError, match="aborted"):
        execute_clustering(spark, table, instant, heartbeat_interval=1)


def test_a_cancellable_compaction_stops_at_the_pre_commit_check(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=9)
    before, slices = oracle.snapshot(base), oracle.file_slices(base)
    table = HudiTable.open(base)
    instant = schedule_compaction(table, cancellable=True)
    assert instant is not None
    real = executor_module.run_tasks
    monkeypatch.setattr(executor_module, "run_tasks", cancelling("after", table, instant, real))
    with pytest.raises(PlanCancelledError):
        execute_compaction(spark, table, instant, heartbeat_interval=1)
    assert_aborted(base, instant)
    assert oracle.snapshot(base).equals(before)
    assert oracle.file_slices(base) == slices


def test_a_plan_that_is_not_cancellable_runs_past_a_cancel_file(spark: Any, tmp_path: Path) -> None:
    """A writer that writes a request for a plan without the flag is not obeyed: the plan
    must run to completion, as a Hudi plan without the flag does."""
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=9)
    before = oracle.snapshot(base)
    table = HudiTable.open(base)
    instant = schedule_compaction(table)
    assert instant is not None
    table.storage.write_bytes(cancel_requests.cancel_path(instant), b"")
    result = execute_compaction(spark, table, instant, heartbeat_interval=1)
    assert result.files_written > 0
    assert HudiTable.open(base).timeline().is_completed(instant)
    assert oracle.snapshot(base).equals(before)


def test_a_cancelled_clustering_keeps_a_real_tables_metadata_table_true(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hudi 1.1's copy-on-write table with files, column and partition stats, record index
    and secondary indexes: the clustering's metadata delta commit goes with its files."""
    root = copy_of("cow_v9_txns_simple_meta", tmp_path)
    before = rows(root)
    table = HudiTable.open(str(root))
    instant = schedule_clustering(table, target_file_size=group_target(str(root), 8))
    assert instant is not None
    real = executor_module.run_tasks
    monkeypatch.setattr(executor_module, "run_tasks", cancelling("after", table, instant, real))
    with pytest.raises(PlanCancelledError):
        execute_clustering(spark, table, instant, heartbeat_interval=1)
    assert_aborted(str(root), instant)
    assert_metadata_table_true(root, tmp_path, before)
