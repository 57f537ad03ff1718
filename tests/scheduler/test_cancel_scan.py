"""A writer's cancel request (`.hoodie/.cancel/<instant>`, RFC-79) for a plan whose operation
waits to run is noticed by the scheduler's scan, not only once a job starts: the operation
ends CANCELLED with the reason, nothing is written on the table, and the next clean aborts
the plan. Plans that are not cancellable, and tables whose storage fails, are left alone."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from tests import oracle
from tests.scheduler.fakes import FakeEngine, scheduler_for, settings_for
from tests.services.test_clustering import group_target, small_files_table
from tests.store.helpers import make_op
from tms.application import OperationManager
from tms.config import Settings
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.hudi.timeline.instant import State
from tms.scheduler.cancel_scan import CancelScan
from tms.services.clustering.execute import schedule_clustering
from tms.services.registry import table_service
from tms.store import (
    OperationStatus,
    ServiceAction,
    Tbl,
    get_operation,
    list_events,
    register_table,
    session_scope,
)

S = OperationStatus


def table_with_plan(
    session: Session, base: str, name: str, *, cancellable: bool
) -> tuple[Tbl, str]:
    planned = schedule_clustering(
        HudiTable.open(base), target_file_size=group_target(base), cancellable=cancellable
    )
    assert planned is not None
    table = register_table(session, db_name="db", table_name=name, base_path=base).table
    return table, planned


def _writer_cancels(base: str, instant: str) -> None:
    """What a Hudi writer blocked by the plan does: an empty file in the cancel folder."""
    table = HudiTable.open(base)
    table.storage.write_bytes(cancel_requests.cancel_path(instant), b"")


def _scan(factory: sessionmaker[Session]) -> CancelScan:
    manager = OperationManager(Settings())
    return CancelScan(
        factory, manager, interval_seconds=30, storage_timeout_seconds=10, storage_threads=8
    )


def test_a_waiting_operation_is_cancelled_by_a_writers_request(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    base = small_files_table(tmp_path / "a", COPY_ON_WRITE, rows=240, table_version=9)
    before = oracle.snapshot(base)
    with session_scope(factory) as s:
        table, planned = table_with_plan(s, base, "a", cancellable=True)
        waiting = make_op(s, table, ServiceAction.CLUSTERING, at=planned, run_at=timedelta(hours=1))
    scan = _scan(factory)
    assert scan.run() == [], "no request yet: nothing to cancel"
    _writer_cancels(base, planned)

    assert scan.run() == [waiting.id]
    assert scan.run() == [], "once cancelled, it is not cancelled again"
    with session_scope(factory) as s:
        operation = get_operation(s, waiting.id)
        assert operation.status is S.CANCELLED
        reasons = [event.reason for event in list_events(s, waiting.id)]
        assert any(f".hoodie/.cancel/{planned}" in (reason or "") for reason in reasons)
    hudi = HudiTable.open(base)
    assert hudi.timeline().get(planned).state is State.REQUESTED  # type: ignore[union-attr]
    assert oracle.snapshot(base).equals(before), "the scan writes nothing on the table"

    table_service("clean").schedule(hudi, {})  # the next clean aborts the plan first
    assert hudi.timeline().get(planned).state is State.ABORTED  # type: ignore[union-attr]
    assert oracle.snapshot(base).equals(before)


def test_plans_that_are_not_cancellable_and_unreadable_tables_are_left_alone(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    kept_base = small_files_table(tmp_path / "kept", COPY_ON_WRITE, rows=240, table_version=6)
    gone_base = small_files_table(tmp_path / "gone", COPY_ON_WRITE, rows=240, table_version=9)
    live_base = small_files_table(tmp_path / "live", COPY_ON_WRITE, rows=240, table_version=8)
    with session_scope(factory) as s:
        kept_table, kept_plan = table_with_plan(s, kept_base, "kept", cancellable=False)
        gone_table, gone_plan = table_with_plan(s, gone_base, "gone", cancellable=True)
        live_table, live_plan = table_with_plan(s, live_base, "live", cancellable=True)
        kept = make_op(s, kept_table, ServiceAction.CLUSTERING, at=kept_plan)
        make_op(s, gone_table, ServiceAction.CLUSTERING, at=gone_plan)
        live = make_op(s, live_table, ServiceAction.CLUSTERING, at=live_plan)
    for base, planned in [(kept_base, kept_plan), (gone_base, gone_plan), (live_base, live_plan)]:
        _writer_cancels(base, planned)
    (Path(gone_base) / ".hoodie" / "hoodie.properties").unlink()  # its storage fails

    assert _scan(factory).run() == [live.id]
    with session_scope(factory) as s:
        assert get_operation(s, kept.id).status is S.SCHEDULED


def test_the_scheduler_scans_in_the_background_every_interval(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=240, table_version=9)
    with session_scope(factory) as s:
        table, planned = table_with_plan(s, base, "t", cancellable=True)
        waiting = make_op(s, table, ServiceAction.CLUSTERING, at=planned, run_at=timedelta(hours=1))
    _writer_cancels(base, planned)
    engine = FakeEngine()
    scheduler = scheduler_for(
        settings_for(tmp_path, cancel_scan_interval_seconds=5), factory, engine
    )

    scheduler.tick()
    scheduler.cancel_scan.join(timeout=60)
    with session_scope(factory) as s:
        assert get_operation(s, waiting.id).status is S.CANCELLED
    assert engine.launches == [], "cancelled before it was due: never launched"
