"""Finishing an attempt: every way an attempt ends goes through `finish_attempt`, which
retries with the one `Backoff` and otherwise gives the operation its final status."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from tests.store.helpers import claim, db_now, make_op, make_table
from tms.store import (
    AttemptOutcome,
    Backoff,
    Cancelled,
    Completed,
    Exited,
    Failed,
    LaunchFailed,
    OperationStatus,
    PlanInvalid,
    cancel_operation,
    finish_attempt,
    get_attempt,
    get_operation,
    list_events,
    reap_expired_leases,
)

S = OperationStatus
NO_JITTER = Backoff(base_seconds=5, factor=2, max_seconds=600, jitter=0)


def test_a_failed_a_lost_and_an_unlaunched_attempt_wait_the_same_backoff(
    session: Session,
) -> None:
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
        cancelled.id: Cancelled(error="stopped"),
        invalid.id: PlanInvalid("the plan vanished from the timeline"),
    }
    statuses = {}
    for operation_id, end in ends.items():
        finished = finish_attempt(session, claims[operation_id].attempt, end, backoff=NO_JITTER)
        assert finished is not None
        statuses[operation_id] = finished.operation.status

    assert statuses == {refused.id: S.FAILED, cancelled.id: S.CANCELLED, invalid.id: S.INVALID}
    assert get_attempt(session, claims[invalid.id].attempt.id).outcome is AttemptOutcome.FAILED
