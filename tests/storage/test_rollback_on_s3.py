"""Markers, heartbeats, rollback, cancel requests, the aborted state and the table lock on a
real S3 endpoint: a compaction that crashed after its tasks wrote is rolled back from its
markers and run again; a cancellable compaction cancelled on the table is rolled back and
aborted. hudi-rs reads the same rows from the same endpoint throughout."""

from __future__ import annotations

from typing import Any

import pytest

import tms.services.plan_executor as executor_module
from tests.storage.conftest import S3Endpoint, spark_environment
from tests.storage.test_tables_on_s3 import oracle_rows
from tests.storage.test_write_and_compact_on_s3 import log_files, written_table
from tms.hudi.errors import PlanCancelledError
from tms.hudi.files.markers import marker_dir
from tms.hudi.locks import FileSystemLock
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.hudi.timeline.heartbeat import heartbeat_path
from tms.hudi.timeline.instant import Action, State
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.services.plan_cancel import request_cancel

pytestmark = [pytest.mark.spark]


class Crash(Exception):
    """The job dies after its tasks wrote their files, before the instant completes."""


def files_named_by(table: HudiTable, instant: str) -> list[str]:
    return [
        f.path
        for f in table.storage.walk_files("")
        if instant in f.name and ".hoodie" not in f.path
    ]


def test_a_crashed_compaction_on_s3_is_rolled_back_and_run_again(
    spark: Any, s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark_environment(spark, s3)
    base = s3.base_path("crashed")
    written_table(base, table_version=9)
    before = oracle_rows(base, s3.hudi_rs_options)
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    real = executor_module.run_tasks

    def crash_after_tasks(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise Crash()

    monkeypatch.setattr(executor_module, "run_tasks", crash_after_tasks)
    with pytest.raises(Crash):
        execute_compaction(spark, HudiTable.open(base), instant, heartbeat_interval=1)
    table = HudiTable.open(base)
    assert table.timeline().get(instant).state is State.INFLIGHT  # type: ignore[union-attr]
    partial = files_named_by(table, instant)
    assert partial and table.storage.list_dir(marker_dir(instant)), "files and their markers"
    assert oracle_rows(base, s3.hudi_rs_options).equals(before), "readers ignore them"

    monkeypatch.setattr(executor_module, "run_tasks", real)
    result = execute_compaction(spark, HudiTable.open(base), instant, heartbeat_interval=1)
    assert len(result.rolled_back) == 1
    table = HudiTable.open(base)
    assert table.timeline().is_completed(instant)
    assert not set(partial) & set(files_named_by(table, instant)), "new write tokens"
    assert not table.storage.exists(heartbeat_path(instant))
    assert oracle_rows(base, s3.hudi_rs_options).equals(before)
    assert log_files(base, s3.hudi_rs_options) == []


def test_a_cancellable_compaction_on_s3_is_cancelled_on_the_table(
    spark: Any, s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    spark_environment(spark, s3)
    base = s3.base_path("cancelled")
    written_table(base, table_version=6)
    before = oracle_rows(base, s3.hudi_rs_options)
    table = HudiTable.open(base)
    instant = schedule_compaction(table, cancellable=True)
    assert instant is not None
    real = executor_module.run_tasks

    def cancel_after_tasks(*args: Any, **kwargs: Any) -> Any:
        outcomes = real(*args, **kwargs)
        assert request_cancel(table, instant)
        return outcomes

    monkeypatch.setattr(executor_module, "run_tasks", cancel_after_tasks)
    with pytest.raises(PlanCancelledError):
        execute_compaction(spark, table, instant, heartbeat_interval=1)
    table = HudiTable.open(base)
    aborted = table.timeline().get(instant)
    assert aborted is not None and aborted.state is State.ABORTED
    assert files_named_by(table, instant) == []
    assert cancel_requests.cancel_requests(table.storage) == []
    assert len(table.timeline().completed((Action.ROLLBACK,))) == 1
    assert not table.storage.exists(FileSystemLock(table.storage).path), "the lock is released"
    assert oracle_rows(base, s3.hudi_rs_options).equals(before)


def test_the_table_lock_on_s3_has_one_holder(s3: S3Endpoint) -> None:
    """A conditional PUT creates the lock file: a second holder is refused until it goes."""
    storage = Storage(s3.base_path("locked"), storage_options=s3.storage_options)
    first = FileSystemLock(storage, owner="first")
    second = FileSystemLock(storage, owner="second")
    assert first.try_acquire()
    assert not second.try_acquire()
    first.release()
    assert second.try_acquire()
    second.release()
