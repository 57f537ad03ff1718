"""A cancel that stops a job before it could cancel its plan (killed while it still started
Spark) does not leave the plan pending: the scheduler aborts it on the table, and the retry
plans the file groups again. Plans that run to completion, and plans a job still beats the
heartbeat of, are left as they must be."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from tests import oracle
from tests.scheduler.fakes import FakeEngine, scheduler_for, settings_for
from tests.scheduler.test_cancel_scan import table_with_plan
from tests.services.test_clustering import group_target, small_files_table
from tests.store.helpers import make_op
from tms.application import cancel, retry
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests as table_cancel
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import State
from tms.services.clustering.execute import schedule_clustering
from tms.store import (
    AttemptOutcome,
    OperationStatus,
    ServiceAction,
    get_attempt,
    get_operation,
    plans_to_abort,
    session_scope,
)

S = OperationStatus


def _plan(base: str, *, cancellable: bool = True) -> str | None:
    """What a clustering job plans on the table now (None: no file group left to plan)."""
    return schedule_clustering(
        HudiTable.open(base), target_file_size=group_target(base), cancellable=cancellable
    )


def _state(base: str, instant: str) -> State:
    found = HudiTable.open(base).timeline().get(instant)
    assert found is not None
    return found.state


def _marked(factory: sessionmaker[Session]) -> list[int]:
    with session_scope(factory) as s:
        return [operation.id for operation, _ in plans_to_abort(s, limit=100)]


def test_a_job_killed_while_starting_leaves_no_plan_pending(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    base = small_files_table(tmp_path / "t", COPY_ON_WRITE, rows=240, table_version=9)
    with session_scope(factory) as s:
        table, planned = table_with_plan(s, base, "t", cancellable=True)
        op = make_op(s, table, ServiceAction.CLUSTERING, at=planned)
    before = oracle.snapshot(base)
    engine = FakeEngine()  # the job never gets past starting Spark: it writes nothing
    settings = settings_for(tmp_path, heartbeat_interval_seconds=2)
    scheduler = scheduler_for(settings, factory, engine, cancel_grace_seconds=0)
    (attempt_id,) = scheduler.tick().launched
    with session_scope(factory) as s:
        cancel(s, [op.id], reason="operator", table=None)

    assert scheduler.tick().killed == [attempt_id]
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.CANCELLED
        assert get_attempt(s, attempt_id).outcome is AttemptOutcome.CANCELLED
        again = retry(s, op.id, reason="operator")
    assert _state(base, planned) is State.REQUESTED, "the job never cancelled it"
    assert _marked(factory) == [op.id]
    assert scheduler.tick().launched == [], "the retry waits: the old plan holds its groups"

    assert scheduler.cancelled_plans.run() == [op.id]

    assert _state(base, planned) is State.ABORTED
    assert table_cancel.is_cancel_requested(HudiTable.open(base).storage, planned) is False
    assert _marked(factory) == []
    assert oracle.snapshot(base).equals(before), "the rows read the same"
    assert _plan(base) is not None, "the file groups are free to plan again"
    (launched,) = scheduler.tick().launched
    with session_scope(factory) as s:
        assert get_attempt(s, launched).operation_id == again.id


def test_plans_that_run_to_completion_or_still_beat_are_left_alone(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    kept_base = small_files_table(tmp_path / "kept", COPY_ON_WRITE, rows=240, table_version=6)
    live_base = small_files_table(tmp_path / "live", COPY_ON_WRITE, rows=240, table_version=9)
    with session_scope(factory) as s:
        kept_table, kept_plan = table_with_plan(s, kept_base, "kept", cancellable=False)
        live_table, live_plan = table_with_plan(s, live_base, "live", cancellable=True)
        kept = make_op(s, kept_table, ServiceAction.CLUSTERING, at=kept_plan)
        live = make_op(s, live_table, ServiceAction.CLUSTERING, at=live_plan)
        cancel(s, [kept.id, live.id], reason="operator", table=None)
    live_storage = HudiTable.open(live_base).storage
    heartbeat.beat(live_storage, live_plan)  # a job on another instance still runs it
    scheduler = scheduler_for(
        settings_for(tmp_path, heartbeat_interval_seconds=600, lease_seconds=1800),
        factory,
        FakeEngine(),
    )

    assert scheduler.cancelled_plans.run() == [kept.id]
    assert _state(kept_base, kept_plan) is State.REQUESTED, "Hudi runs it to completion"
    assert _state(live_base, live_plan) is State.REQUESTED
    assert table_cancel.is_cancel_requested(live_storage, live_plan), "the job sees it"
    assert _marked(factory) == [live.id]

    heartbeat.stop_heartbeat(live_storage, live_plan)  # that job stopped
    assert scheduler.cancelled_plans.run() == [live.id]
    assert _state(live_base, live_plan) is State.ABORTED
    assert _marked(factory) == []
