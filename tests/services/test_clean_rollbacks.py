"""What a clean finishes before it plans: plans with a cancel request and stale cancellable
plans are aborted (RFC-79); failed writes with a stale heartbeat are rolled back when asked.
Every outcome is read back through hudi-rs."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests import oracle
from tests.services.test_clustering import group_target, small_files_table, trips
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests, heartbeat
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import new_instant_time, request, transition
from tms.services.clean.plan import schedule_clean
from tms.services.clean.rollbacks import finish_before_clean
from tms.services.clustering.execute import schedule_clustering
from tms.testing.sample_writer.writer import HudiWriter


def clustering_plan(tmp_path: Path, *, cancellable: bool = True) -> tuple[str, str]:
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=240, table_version=9)
    instant = schedule_clustering(
        HudiTable.open(base), target_file_size=group_target(base), cancellable=cancellable
    )
    assert instant is not None
    return base, instant


def state_of(base: str, instant: str) -> State:
    found = HudiTable.open(base).timeline().get(instant)
    assert found is not None
    return found.state


def test_a_clean_aborts_a_plan_a_writer_asked_to_cancel(tmp_path: Path) -> None:
    base, instant = clustering_plan(tmp_path)
    before = oracle.snapshot(base)
    table = HudiTable.open(base)
    table.storage.write_bytes(cancel_requests.cancel_path(instant), b"")  # as a writer does
    clean = schedule_clean(table, retained=1)
    assert state_of(base, instant) is State.ABORTED
    assert cancel_requests.cancel_requests(table.storage) == []
    assert table.file_system_view().pending_clustering_file_ids() == set()
    assert clean is not None, "the clean plans what the plan no longer protects"
    assert oracle.snapshot(base).equals(before)


def test_a_clean_cancels_cancellable_plans_past_the_cancellation_policy(tmp_path: Path) -> None:
    base, instant = clustering_plan(tmp_path)
    table = HudiTable.open(base)
    HudiWriter(table, max_file_rows=60).insert(trips(range(5000, 5010), ts=9))
    schedule_clean(table, retained=1, cancel_plans_after_instants=2)
    assert state_of(base, instant) is State.REQUESTED, "one write since: not stale yet"
    HudiWriter(table, max_file_rows=60).insert(trips(range(5010, 5020), ts=9))
    before = oracle.snapshot(base)
    schedule_clean(table, retained=1, cancel_plans_after_instants=2)
    assert state_of(base, instant) is State.ABORTED
    assert oracle.snapshot(base).equals(before)


def test_stale_by_hours_and_never_while_its_job_beats(tmp_path: Path) -> None:
    base, instant = clustering_plan(tmp_path)
    table = HudiTable.open(base)
    later = time.time() + 3 * 3600
    soon = finish_before_clean(table, table.timeline(), cancel_after_hours=4, now=later)
    assert soon.aborted == [] and state_of(base, instant) is State.REQUESTED
    heartbeat.beat(table.storage, instant)
    beating = finish_before_clean(table, table.timeline(), cancel_after_hours=2, now=later)
    assert beating.aborted == [] and beating.left == [instant]
    assert state_of(base, instant) is State.REQUESTED
    assert cancel_requests.is_cancel_requested(table.storage, instant), "requested, aborted later"
    heartbeat.stop_heartbeat(table.storage, instant)
    done = finish_before_clean(table, table.timeline(), cancel_after_hours=2, now=later)
    assert done.aborted == [instant] and state_of(base, instant) is State.ABORTED


def test_a_plan_that_is_not_cancellable_is_never_cancelled_by_clean(tmp_path: Path) -> None:
    base, instant = clustering_plan(tmp_path, cancellable=False)
    table = HudiTable.open(base)
    table.storage.write_bytes(cancel_requests.cancel_path(instant), b"")
    done = finish_before_clean(table, table.timeline(), cancel_after_instants=1)
    assert done.aborted == [] and done.left == [instant]
    assert state_of(base, instant) is State.REQUESTED


def failed_write(base: str, *, beat_age: float | None) -> tuple[str, Path]:
    """An inflight delta commit that wrote one file (with its marker) and stopped."""
    table = HudiTable.open(base)
    ts = new_instant_time(table.timeline().instants)
    requested = request(table.storage, table.config, ts, Action.COMMIT)
    transition(table.storage, table.config, requested, State.INFLIGHT)
    name = f"00000000-0000-0000-0000-000000000000-0_0-1-1_{ts}.parquet"
    create_marker(table.storage, ts, Marker("eu", name, MarkerType.CREATE))
    partial = Path(base) / "eu" / name
    partial.write_bytes(b"half a parquet file")
    if beat_age is not None:
        heartbeat.beat(table.storage, ts)
        stale = time.time() - beat_age
        os.utime(Path(base) / heartbeat.heartbeat_path(ts), (stale, stale))
    return ts, partial


def test_failed_writes_with_a_stale_heartbeat_are_rolled_back_when_asked(tmp_path: Path) -> None:
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=120, table_version=9)
    before = oracle.snapshot(base)
    failed, partial = failed_write(base, beat_age=3600)
    eager, eager_file = failed_write(base, beat_age=None)  # no heartbeat: may still run
    table = HudiTable.open(base)
    assert finish_before_clean(table, table.timeline()).rolled_back == [], "off by default"
    done = finish_before_clean(table, table.timeline(), rollback_failed_writes=True)
    assert done.rolled_back == [failed]
    assert not partial.exists() and eager_file.exists()
    timeline = HudiTable.open(base).timeline()
    assert timeline.get(failed) is None and timeline.get(eager) is not None
    assert [i.action for i in timeline.completed((Action.ROLLBACK,))] == [Action.ROLLBACK]
    eager_file.unlink()  # the test's own half file: hudi-rs would not read it either way
    assert oracle.snapshot(base).equals(before)
