from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import claim, db_now, make_op, make_table
from tms.store import (
    AttemptOutcome,
    NotFound,
    OperationStatus,
    TransitionRefused,
    cancel_scheduled,
    complete_operation,
    fail_attempt,
    finish_cancelled,
    get_attempt,
    get_operation,
    invalidate_operation,
    list_attempts,
    list_events,
    request_cancel_of_running,
    reschedule_operation,
    retry_operation,
)

S = OperationStatus


def test_complete(session: Session) -> None:
    op = make_op(session, make_table(session))
    (c,) = claim(session)
    done = complete_operation(
        session, c.attempt, result={"files": 3}, figures={"bytes": 10}, exit_code=0
    )
    assert (done.status, done.result, done.lease_owner, done.current_attempt_id) == (
        S.COMPLETED,
        {"files": 3},
        None,
        None,
    )
    assert done.finished_at is not None
    attempt = get_attempt(session, c.attempt.id)
    assert (attempt.outcome, attempt.exit_code, attempt.figures) == (
        AttemptOutcome.SUCCEEDED,
        0,
        {"bytes": 10},
    )
    assert attempt.finished_at is not None
    with pytest.raises(TransitionRefused, match="status is COMPLETED, expected RUNNING"):
        complete_operation(session, c.attempt)
    assert [e.to_status for e in list_events(session, op.id)] == [
        S.SCHEDULED,
        S.RUNNING,
        S.COMPLETED,
    ]


def test_guarded_transitions_refuse_the_wrong_status(session: Session) -> None:
    op = make_op(session, make_table(session))
    with pytest.raises(TransitionRefused, match="cannot retry: status is SCHEDULED"):
        retry_operation(session, op.id)
    (c,) = claim(session)
    with pytest.raises(TransitionRefused, match="cannot reschedule: status is RUNNING"):
        reschedule_operation(session, op.id, at=timedelta(minutes=1), reason="later")
    complete_operation(session, c.attempt)
    refusals: list[Callable[[], object]] = [
        lambda: cancel_scheduled(session, op.id, reason="late"),
        lambda: request_cancel_of_running(session, op.id, reason="late"),
        lambda: invalidate_operation(session, op.id, reason="gone"),
        lambda: fail_attempt(session, c.attempt, error="late"),
        lambda: finish_cancelled(session, c.attempt),
    ]
    for refused in refusals:
        with pytest.raises(TransitionRefused, match="status is COMPLETED"):
            refused()
    with pytest.raises(NotFound):
        cancel_scheduled(session, 999_999, reason="gone")
    assert [e.to_status for e in list_events(session, op.id)][-1] is S.COMPLETED


def test_a_stale_attempt_cannot_finish_a_newer_one(session: Session) -> None:
    op = make_op(session, make_table(session))
    (first,) = claim(session)
    fail_attempt(session, first.attempt, error="boom", retry_at=timedelta(0))
    (second,) = claim(session)
    assert second.attempt.number == 2
    with pytest.raises(TransitionRefused, match=f"attempt {first.attempt.id} no longer holds"):
        complete_operation(session, first.attempt)
    assert complete_operation(session, second.attempt).status is S.COMPLETED
    assert [a.outcome for a in list_attempts(session, op.id)] == [
        AttemptOutcome.FAILED,
        AttemptOutcome.SUCCEEDED,
    ]


def test_a_failure_applies_the_decided_status(session: Session) -> None:
    """The store applies what `application.attempt_end` decided: with `retry_at`, SCHEDULED
    then; without, FAILED (the retry budget is the application's rule)."""
    op = make_op(session, make_table(session), max_retries=0)
    (c,) = claim(session)
    retried = fail_attempt(
        session, c.attempt, error="lost", exit_code=1, retry_at=timedelta(seconds=30)
    )
    assert (retried.status, retried.last_error) == (S.SCHEDULED, "lost")
    assert retried.next_run_at == db_now(session) + timedelta(seconds=30)
    (c2,) = claim(session, now=db_now(session) + timedelta(seconds=31))
    failed = fail_attempt(session, c2.attempt, error="again", reason="failed, out of retries")
    assert (failed.status, failed.finished_at is not None) == (S.FAILED, True)
    assert [e.reason for e in list_events(session, op.id)][-1] == "failed, out of retries"


def test_cancel(session: Session) -> None:
    """The two statements a cancel applies (`application.cancel` decides which): a
    scheduled operation CANCELLED at once, a running one's job asked to stop."""
    table, other = make_table(session, "t"), make_table(session, "u")
    scheduled = make_op(session, table)
    assert cancel_scheduled(session, scheduled.id, reason="operator").status is S.CANCELLED

    running = make_op(session, other)
    claims = {c.operation.id: c for c in claim(session)}
    requested = request_cancel_of_running(session, running.id, reason="operator")
    assert requested.status is S.RUNNING and requested.cancel_requested
    with pytest.raises(TransitionRefused, match="status is CANCELLED, expected RUNNING"):
        request_cancel_of_running(session, scheduled.id, reason="operator")
    done = finish_cancelled(session, claims[running.id].attempt, error="stopped")
    assert done.status is S.CANCELLED
    assert get_attempt(session, claims[running.id].attempt.id).outcome is AttemptOutcome.CANCELLED
    reasons = [(e.to_status, e.reason) for e in list_events(session, running.id)]
    assert reasons[-2:] == [
        (S.RUNNING, "cancel requested: operator"),
        (S.CANCELLED, "cancelled by request"),
    ]
    assert retry_operation(session, running.id).status is S.SCHEDULED


def test_invalidate(session: Session) -> None:
    table = make_table(session)
    op = make_op(session, table)
    (c,) = claim(session)
    invalid = invalidate_operation(session, op.id, reason="plan vanished from the timeline")
    assert (invalid.status, invalid.last_error) == (S.INVALID, "plan vanished from the timeline")
    attempt = get_attempt(session, c.attempt.id)
    assert (attempt.outcome, attempt.error) == (
        AttemptOutcome.FAILED,
        "plan vanished from the timeline",
    )
    pending = make_op(session, table)
    assert invalidate_operation(session, pending.id, reason="gone").status is S.INVALID


def test_reschedule(session: Session) -> None:
    op = make_op(session, make_table(session))
    later = reschedule_operation(session, op.id, at=timedelta(minutes=10), reason="table busy")
    assert later.status is S.SCHEDULED
    assert later.next_run_at == db_now(session) + timedelta(minutes=10)
    assert list_events(session, op.id)[-1].reason == "table busy"


def test_racing_transitions_have_one_winner(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        op = make_op(session, make_table(session))
    with factory.begin() as session:
        (c,) = claim(session)
    outcomes: list[str] = []

    def operator_invalidates() -> None:
        with factory() as session:
            try:
                invalidate_operation(session, op.id, reason="plan vanished")
                session.commit()
                outcomes.append("invalidated")
            except TransitionRefused:
                outcomes.append("refused")

    with factory() as job:
        complete_operation(job, c.attempt)  # holds the row lock until commit
        racer = threading.Thread(target=operator_invalidates)
        racer.start()
        racer.join(timeout=0.5)
        assert racer.is_alive(), "the second transition should wait for the first"
        job.commit()
        racer.join(timeout=10)
    assert outcomes == ["refused"]
    with factory() as session:
        assert get_operation(session, op.id).status is S.COMPLETED
        assert [e.to_status for e in list_events(session, op.id)] == [
            S.SCHEDULED,
            S.RUNNING,
            S.COMPLETED,
        ]
