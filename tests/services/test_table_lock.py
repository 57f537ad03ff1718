"""Scheduling a plan and completing an instant take the table lock the writers use: while a
writer holds `.hoodie/lock`, tms neither plans nor commits, and it does both once the lock
is free. hudi-rs reads the table the same throughout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.services.test_clustering import small_files_table
from tms.hudi.locks import FileSystemLock, LockSpec, LockTimeoutError
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import State
from tms.services.compaction.execute import execute_compaction
from tms.services.registry import table_service

QUICK = LockSpec.of(wait_seconds=0.3)


def test_no_plan_is_scheduled_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=120, table_version=9)
    table = HudiTable.open(base, lock=QUICK)
    writer_lock = FileSystemLock(table.storage, owner="writer")
    with writer_lock:
        with pytest.raises(LockTimeoutError, match="writer@"):
            table_service("compaction").schedule(table, {})
        assert table.timeline().pending_compactions() == []
    assert table_service("compaction").schedule(table, {}) is not None


@pytest.mark.spark
def test_no_instant_completes_while_a_writer_holds_the_lock(spark: Any, tmp_path: Path) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=120, table_version=6)
    before = oracle.snapshot(base)
    table = HudiTable.open(base, lock=QUICK)
    instant = table_service("compaction").schedule(table, {})
    assert instant is not None
    with FileSystemLock(table.storage, owner="writer"), pytest.raises(LockTimeoutError):
        execute_compaction(spark, table, instant, heartbeat_interval=1)
    assert table.timeline().get(instant).state is State.INFLIGHT  # type: ignore[union-attr]
    assert oracle.snapshot(base).equals(before)
    result = execute_compaction(spark, table, instant, heartbeat_interval=1)
    assert len(result.rolled_back) == 1, "the attempt that could not commit is rolled back"
    assert table.timeline().is_completed(instant)
    assert oracle.snapshot(base).equals(before)
