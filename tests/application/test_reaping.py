"""Leases that expired: `reap_expired_leases` ends their attempts as LOST and decides what
becomes of each operation (retried after the backoff, failed when out of retries, cancelled
when a cancel was pending)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from tests.store.helpers import claim, db_now, make_op, make_table
from tms.application.attempt_end import reap_expired_leases
from tms.application.cancel import cancel_operation
from tms.backoff import Backoff
from tms.store import (
    AttemptOutcome,
    OperationStatus,
    extend_lease,
    get_attempt,
    list_events,
)

S = OperationStatus
NO_JITTER = Backoff(base_seconds=5, factor=2, max_seconds=600, jitter=0)


def test_lost_attempt_is_retried_with_backoff(session: Session) -> None:
    op = make_op(session, make_table(session, "t"), max_retries=2)
    healthy = make_op(session, make_table(session, "u"))
    claims = {c.operation.id: c for c in claim(session, lease_seconds=10)}
    start = db_now(session)
    extend_lease(session, claims[healthy.id].attempt, lease_seconds=60)

    assert reap_expired_leases(session, backoff=NO_JITTER, now=start + timedelta(seconds=9)) == []
    later = start + timedelta(seconds=11)
    (reaped,) = reap_expired_leases(session, backoff=NO_JITTER, now=later)
    assert reaped.operation.id == op.id and reaped.attempt.id == claims[op.id].attempt.id
    assert reaped.operation.status is S.SCHEDULED
    assert reaped.operation.next_run_at == later + timedelta(seconds=5)  # base · 2^0
    assert reaped.operation.lease_owner is None and reaped.operation.current_attempt_id is None
    assert "lease expired" in (reaped.operation.last_error or "")
    attempt = reaped.attempt
    assert attempt.outcome is AttemptOutcome.LOST and attempt.finished_at == later
    assert "lease expired" in (attempt.error or "")
    assert list_events(session, op.id)[-1].reason == "lease expired"

    # Second loss: the delay doubles.
    (c2,) = claim(session, now=later + timedelta(seconds=6), lease_seconds=10)
    assert c2.attempt.number == 2
    again = later + timedelta(seconds=20)
    (reaped2,) = reap_expired_leases(session, backoff=NO_JITTER, now=again)
    assert reaped2.operation.next_run_at == again + timedelta(seconds=10)


def test_lost_attempt_out_of_retries_fails(session: Session) -> None:
    op = make_op(session, make_table(session), max_retries=0)
    claim(session, lease_seconds=1)
    (reaped,) = reap_expired_leases(
        session, backoff=NO_JITTER, now=db_now(session) + timedelta(seconds=2)
    )
    assert reaped.operation.id == op.id
    assert reaped.operation.status is S.FAILED and reaped.operation.finished_at is not None
    assert get_attempt(session, reaped.attempt.id).outcome is AttemptOutcome.LOST
    assert [(e.from_status, e.to_status) for e in list_events(session, op.id)][-1] == (
        S.RUNNING,
        S.FAILED,
    )


def test_lost_attempt_of_a_cancel_request_is_cancelled(session: Session) -> None:
    op = make_op(session, make_table(session))
    claim(session, lease_seconds=1)
    cancel_operation(session, op.id)
    (reaped,) = reap_expired_leases(
        session, backoff=NO_JITTER, now=db_now(session) + timedelta(seconds=2)
    )
    assert reaped.operation.status is S.CANCELLED
