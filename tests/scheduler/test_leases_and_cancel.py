"""Leases that expire and cancel requests, as the scheduler handles them."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from tests.scheduler.fakes import FakeEngine, scheduler_for, settings_for
from tests.store.helpers import make_op, make_table
from tms.application.cancel import cancel_operation
from tms.store import (
    AttemptOutcome,
    OperationStatus,
    complete_operation,
    get_attempt,
    get_operation,
    list_attempts,
    session_scope,
)

S = OperationStatus


def test_expired_lease_is_lost_and_rescheduled(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    with session_scope(factory) as s:
        op = make_op(s, make_table(s), max_retries=3)
    engine = FakeEngine()  # a job that hangs and never heartbeats
    settings = settings_for(
        tmp_path,
        lease_seconds=1.0,
        heartbeat_interval_seconds=0.5,
        retry_base_seconds=0.0,
        launch_grace_seconds=0.0,
    )
    scheduler = scheduler_for(settings, factory, engine)
    (first,) = scheduler.tick().launched

    time.sleep(1.3)
    report = scheduler.tick()

    assert report.reaped == [op.id] and report.killed == [first]
    assert engine.handle(first).killed
    (second,) = report.launched  # retry due at once (base delay 0): claimed again
    with session_scope(factory) as s:
        lost = get_attempt(s, first)
        assert lost.outcome is AttemptOutcome.LOST and "lease expired" in (lost.error or "")
        assert lost.exit_code == -9  # the hung process was killed
        operation = get_operation(s, op.id)
        assert operation.status is S.RUNNING and operation.current_attempt_id == second
        assert [a.number for a in list_attempts(s, op.id)] == [1, 2]


def test_expired_lease_out_of_retries_fails(factory: sessionmaker[Session], tmp_path: Path) -> None:
    with session_scope(factory) as s:
        op = make_op(s, make_table(s), max_retries=0)
    settings = settings_for(
        tmp_path, lease_seconds=0.5, heartbeat_interval_seconds=0.2, launch_grace_seconds=0.0
    )
    scheduler = scheduler_for(settings, factory, FakeEngine())
    scheduler.tick()
    time.sleep(0.8)
    assert scheduler.tick().reaped == [op.id]
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.FAILED


def test_a_new_attempt_gets_the_launch_grace_before_its_first_heartbeat(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    """spark-submit and the job take seconds to start: a first lease of the bare lease
    length would lose healthy jobs before they could heartbeat."""
    with session_scope(factory) as s:
        op = make_op(s, make_table(s), max_retries=0)
    settings = settings_for(
        tmp_path, lease_seconds=0.5, heartbeat_interval_seconds=0.2, launch_grace_seconds=30.0
    )
    scheduler = scheduler_for(settings, factory, FakeEngine())
    scheduler.tick()
    time.sleep(0.8)
    assert scheduler.tick().reaped == []
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.RUNNING


def test_cancel_kills_the_job(factory: sessionmaker[Session], tmp_path: Path) -> None:
    with session_scope(factory) as s:
        op = make_op(s, make_table(s))
    engine = FakeEngine()
    scheduler = scheduler_for(settings_for(tmp_path), factory, engine, cancel_grace_seconds=0)
    (attempt_id,) = scheduler.tick().launched
    with session_scope(factory) as s:
        cancel_operation(s, op.id)

    report = scheduler.tick()

    assert report.killed == [attempt_id] and report.exited == [attempt_id]
    assert engine.handle(attempt_id).killed
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.CANCELLED
        attempt = get_attempt(s, attempt_id)
        assert attempt.outcome is AttemptOutcome.CANCELLED and attempt.exit_code == -9
        assert "killed by the scheduler: cancel requested" in (attempt.error or "")
    assert scheduler.running == {}


def test_cancel_grace_lets_the_job_stop_itself(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    with session_scope(factory) as s:
        op = make_op(s, make_table(s))
    engine = FakeEngine()
    scheduler = scheduler_for(settings_for(tmp_path), factory, engine, cancel_grace_seconds=60)
    (attempt_id,) = scheduler.tick().launched
    with session_scope(factory) as s:
        cancel_operation(s, op.id)
    assert scheduler.tick().killed == []  # within the grace period

    engine.handle(attempt_id).finish(0)  # it stopped, but died before reporting
    assert scheduler.tick().exited == [attempt_id]
    assert not engine.handle(attempt_id).killed
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.CANCELLED
        assert get_attempt(s, attempt_id).exit_code == 0


def test_job_lingering_after_its_result_is_killed_after_grace(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    with session_scope(factory) as s:
        op = make_op(s, make_table(s))
    engine = FakeEngine()
    clock = [0.0]
    scheduler = scheduler_for(
        settings_for(tmp_path), factory, engine, cancel_grace_seconds=30, clock=lambda: clock[0]
    )
    (attempt_id,) = scheduler.tick().launched
    with session_scope(factory) as s:
        complete_operation(s, get_attempt(s, attempt_id))  # reported, but the process hangs
    assert scheduler.tick().killed == []
    clock[0] += 31
    report = scheduler.tick()
    assert report.killed == [attempt_id]
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.COMPLETED  # the report stands
        attempt = get_attempt(s, attempt_id)
        # complete_operation recorded exit code 0 with the report; a later kill keeps it.
        assert attempt.outcome is AttemptOutcome.SUCCEEDED and attempt.exit_code == 0
