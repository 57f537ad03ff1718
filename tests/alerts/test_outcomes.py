"""What a webhook try makes of an alert, decided by `alerts.outcomes` and applied by the
store only while no other claim recorded a try since; counted once committed."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from tests.alerts.helpers import NO_JITTER, alerts, counted, fail_for_good
from tms.alerts.outcomes import Delivery, TryOutcome, record_try, try_outcome
from tms.store import OPERATION_FAILED, AlertStatus, claim_due_alerts, session_scope

S = AlertStatus
REFUSED = Delivery("HTTP 500")


def test_delivered_retried_after_the_backoff_or_failed_once_out_of_tries() -> None:
    def outcome(tries: int, delivery: Delivery) -> TryOutcome:
        return try_outcome(tries, delivery, max_deliveries=3, backoff=NO_JITTER)

    assert outcome(1, Delivery()) == TryOutcome(S.DELIVERED, "delivered")
    assert outcome(3, Delivery()) == TryOutcome(S.DELIVERED, "delivered")
    assert outcome(1, REFUSED) == TryOutcome(S.PENDING, "retried", timedelta(seconds=60))
    assert outcome(2, REFUSED) == TryOutcome(S.PENDING, "retried", timedelta(seconds=120))
    assert outcome(3, REFUSED) == TryOutcome(S.FAILED, "failed")


def test_a_try_recorded_elsewhere_meanwhile_is_neither_recorded_nor_counted(
    factory: sessionmaker[Session], session: Session
) -> None:
    fail_for_good(session)
    now = alerts(session)[0].created_at
    with session_scope(factory) as first:  # this instance's lease runs out mid-try
        (stale,) = claim_due_alerts(first, limit=1, lease_seconds=30, now=now)
    later = now + timedelta(seconds=31)
    before = {o: counted(OPERATION_FAILED, o) for o in ("delivered", "retried")}
    with session_scope(factory) as second:
        (fresh,) = claim_due_alerts(second, limit=1, lease_seconds=30, now=later)
        tried = record_try(second, fresh, Delivery(), max_deliveries=3, backoff=NO_JITTER)
        assert tried is not None and (tried.status, tried.deliveries) == (S.DELIVERED, 1)

    with session_scope(factory) as first:
        late = record_try(first, stale, REFUSED, max_deliveries=3, backoff=NO_JITTER, now=later)
        assert late is None

    assert counted(OPERATION_FAILED, "delivered") == before["delivered"] + 1
    assert counted(OPERATION_FAILED, "retried") == before["retried"]
    session.expire_all()
    (alert,) = alerts(session)
    assert (alert.status, alert.deliveries, alert.last_error) == (S.DELIVERED, 1, None)
