"""Finishing an attempt: every way an attempt ends goes through `finish_attempt`, which
retries with the one `Backoff` and otherwise gives the operation its final status."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from tests.store.helpers import claim, db_now, make_op, make_table
from tms.application.attempt_end import (
    Completed,
    Exited,
    Failed,
    LaunchFailed,
    PlanInvalid,
    StoppedOnCancel,
    finish_attempt,
    reap_expired_leases,
)
from tms.application.cancel import cancel_operation
from tms.backoff import Backoff
from tms.store import (
    AttemptOutcome,
    OperationStatus,
    get_attempt,
    get_operation,
    list_attempts,
    list_events,
    retry_operation,
)

S = OperationStatus
NO_JITTER = Backoff(base_seconds=5, factor=2, max_seconds=600, jitter=0)
THIRTY_SECONDS = Backoff(base_seconds=30, jitter=0)


def test_a_failed_a_lost_and_an_unlaunched_attempt_wait_the_same_backoff(session: Session) -> None:
    failed_op = make_op(session, make_table(session, "f"), max_retries=2)
    lost_op = make_op(session, make_table(session, "l"), max_retries=2)
    unlaunched_op = make_op(session, make_table(session, "u"), max_retries=2)
    claims = {c.operation.id: c for c in claim(session, lease_seconds=1)}

    failed = finish_attempt(
        session,
        claims[failed_op.id].attempt,
        Failed("executor lost", retryable=True),
        backoff=NO_JITTER,
    )
    unlaunched = finish_attempt(
        session,
        claims[unlaunched_op.id].attempt,
        LaunchFailed("spark-submit not found", retryable=True),
        backoff=NO_JITTER,
    )
    later = db_now(session) + timedelta(seconds=2)
    (lost,) = reap_expired_leases(session, backoff=NO_JITTER, now=later)

    assert failed is not None and unlaunched is not None
    for finished in (failed, unlaunched, lost):
        operation, attempt = finished.operation, finished.attempt
        assert operation.status is S.SCHEDULED
        assert attempt.finished_at is not None
        assert operation.next_run_at - attempt.finished_at == timedelta(seconds=5)
    assert lost.operation.id == lost_op.id
    assert lost.attempt.outcome is AttemptOutcome.LOST
    assert unlaunched.operation.last_error == "launch failed: spark-submit not found"


def test_an_attempt_that_lost_its_lease_adds_nothing(session: Session) -> None:
    op = make_op(session, make_table(session))
    (c,) = claim(session)
    done = finish_attempt(session, c.attempt, Completed(figures={"rows": 3}), backoff=NO_JITTER)
    assert done is not None and done.operation.status is S.COMPLETED
    events = len(list_events(session, op.id))

    again = finish_attempt(
        session, c.attempt, Failed("late report", retryable=True), backoff=NO_JITTER
    )

    assert again is None
    assert get_operation(session, op.id).status is S.COMPLETED
    assert get_attempt(session, c.attempt.id).outcome is AttemptOutcome.SUCCEEDED
    assert len(list_events(session, op.id)) == events


def test_an_exit_without_report_is_a_cancel_when_one_was_requested(session: Session) -> None:
    cancelled_op = make_op(session, make_table(session, "c"), max_retries=2)
    failed_op = make_op(session, make_table(session, "f"), max_retries=2)
    claims = {c.operation.id: c for c in claim(session)}
    cancel_operation(session, cancelled_op.id)

    cancelled = finish_attempt(
        session, claims[cancelled_op.id].attempt, Exited("killed", 137), backoff=NO_JITTER
    )
    retried = finish_attempt(
        session, claims[failed_op.id].attempt, Exited("exit 1", 1), backoff=NO_JITTER
    )

    assert cancelled is not None and cancelled.operation.status is S.CANCELLED
    assert cancelled.attempt.outcome is AttemptOutcome.CANCELLED
    assert get_attempt(session, cancelled.attempt.id).exit_code == 137
    assert retried is not None and retried.operation.status is S.SCHEDULED
    assert get_attempt(session, retried.attempt.id).exit_code == 1


def test_final_outcomes_without_retry(session: Session) -> None:
    refused = make_op(session, make_table(session, "r"), max_retries=2)
    cancelled = make_op(session, make_table(session, "c"), max_retries=2)
    invalid = make_op(session, make_table(session, "i"), max_retries=2)
    claims = {c.operation.id: c for c in claim(session)}

    ends = {
        refused.id: Failed("bad plan parameters", retryable=False),
        cancelled.id: StoppedOnCancel(error="stopped"),
        invalid.id: PlanInvalid("the plan vanished from the timeline"),
    }
    statuses = {}
    for operation_id, end in ends.items():
        finished = finish_attempt(session, claims[operation_id].attempt, end, backoff=NO_JITTER)
        assert finished is not None
        statuses[operation_id] = finished.operation.status

    assert statuses == {refused.id: S.FAILED, cancelled.id: S.CANCELLED, invalid.id: S.INVALID}
    assert get_attempt(session, claims[invalid.id].attempt.id).outcome is AttemptOutcome.FAILED


def test_fail_retries_with_backoff_until_out_of_retries(session: Session) -> None:
    op = make_op(session, make_table(session), max_retries=1)
    (c,) = claim(session)
    failed_once = Failed("executor lost", retryable=True, exit_code=1)
    retried = finish_attempt(session, c.attempt, failed_once, backoff=THIRTY_SECONDS).operation
    assert retried.status is S.SCHEDULED and retried.last_error == "executor lost"
    assert retried.next_run_at == db_now(session) + timedelta(seconds=30)
    assert retried.lease_owner is None and retried.finished_at is None
    assert claim(session) == []  # not due yet
    (c2,) = claim(session, now=db_now(session) + timedelta(seconds=31))
    again = Failed("again", retryable=True)
    failed = finish_attempt(session, c2.attempt, again, backoff=THIRTY_SECONDS).operation
    assert (failed.status, failed.run_times, failed.last_error) == (S.FAILED, 2, "again")
    assert failed.finished_at is not None
    attempts = list_attempts(session, op.id)
    assert [(a.number, a.outcome, a.error) for a in attempts] == [
        (1, AttemptOutcome.FAILED, "executor lost"),
        (2, AttemptOutcome.FAILED, "again"),
    ]
    assert attempts[0].exit_code == 1
    assert [(e.from_status, e.to_status) for e in list_events(session, op.id)][2:] == [
        (S.RUNNING, S.SCHEDULED),
        (S.SCHEDULED, S.RUNNING),
        (S.RUNNING, S.FAILED),
    ]


def test_no_retry_when_not_retryable(session: Session) -> None:
    op = make_op(session, make_table(session), retry_on_error=False)
    (c,) = claim(session)
    finished = finish_attempt(session, c.attempt, Failed("x", retryable=True), backoff=NO_JITTER)
    assert finished is not None and finished.operation.status is S.FAILED
    # An operator retry starts a fresh budget; attempt numbers keep counting.
    again = retry_operation(session, op.id)
    assert (again.status, again.run_times, again.finished_at) == (S.SCHEDULED, 0, None)
    (c2,) = claim(session)
    assert (c2.attempt.number, c2.operation.run_times) == (2, 1)
    finished = finish_attempt(session, c2.attempt, Failed("y", retryable=False), backoff=NO_JITTER)
    assert finished is not None and finished.operation.status is S.FAILED
