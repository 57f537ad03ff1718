"""What becomes of an alert, decided here and applied by the store: raised (once per key),
then per webhook try delivered, tried again after a backoff, or failed once out of tries.

Each outcome is counted by `tms_alerts_total` once the transaction that recorded it commits
(`tms.at_commit`): a raise or a try that was rolled back never counts. The store's
statements only apply what was decided (`store.alerts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from tms import metrics
from tms.at_commit import at_commit
from tms.backoff import Backoff
from tms.store import (
    Alert,
    AlertStatus,
    Attempt,
    Operation,
    raise_operation_failed,
    raise_silent_tables,
    record_delivery,
)

__all__ = [
    "Delivery",
    "TryOutcome",
    "alert_failed_operation",
    "alert_silent_tables",
    "record_try",
    "try_outcome",
]

RAISED = "raised"
DELIVERED = "delivered"
RETRIED = "retried"
FAILED = "failed"


@dataclass(frozen=True)
class Delivery:
    """One try's result: `error` is None when the webhook accepted the alert."""

    error: str | None = None


@dataclass(frozen=True)
class TryOutcome:
    """What one try makes of an alert: its status, the delay to its next try (a PENDING
    one), and its `tms_alerts_total` outcome."""

    status: AlertStatus
    label: str
    retry_in: timedelta | None = None


def try_outcome(
    tries: int, delivery: Delivery, *, max_deliveries: int, backoff: Backoff
) -> TryOutcome:
    """The outcome of the `tries`-th try: DELIVERED when the webhook accepted it, FAILED
    once `max_deliveries` tries failed, else PENDING again after `backoff`'s delay."""
    if delivery.error is None:
        return TryOutcome(AlertStatus.DELIVERED, DELIVERED)
    if tries >= max_deliveries:
        return TryOutcome(AlertStatus.FAILED, FAILED)
    return TryOutcome(AlertStatus.PENDING, RETRIED, timedelta(seconds=backoff.delay(tries)))


def record_try(
    session: Session,
    alert: Alert,
    delivery: Delivery,
    *,
    max_deliveries: int,
    backoff: Backoff,
    now: datetime | None = None,
) -> Alert | None:
    """Record the try of a claimed `alert` (as claimed: its `deliveries` then) with its
    outcome, counted once committed. None when another claim recorded a try since (this
    one's lease had run out): nothing is counted."""
    outcome = try_outcome(
        alert.deliveries + 1, delivery, max_deliveries=max_deliveries, backoff=backoff
    )
    recorded = record_delivery(
        session,
        alert,
        status=outcome.status,
        error=delivery.error,
        retry_in=outcome.retry_in,
        now=now,
    )
    if recorded is not None:
        _count(session, recorded.kind, outcome.label)
    return recorded


def alert_failed_operation(
    session: Session,
    operation: Operation,
    attempt: Attempt | None,
    *,
    now: datetime | None = None,
) -> Alert | None:
    """Raise the alert of an operation that just ended FAILED, in the transaction that
    failed it (after its attempt's row was finished); counted once committed. None when it
    was raised before."""
    alert = raise_operation_failed(session, operation, attempt, now=now)
    if alert is not None:
        _count(session, alert.kind, RAISED)
    return alert


def alert_silent_tables(
    session: Session,
    *,
    timeout_seconds: float,
    silent_timeouts: int,
    now: datetime | None = None,
) -> list[Alert]:
    """Raise the alerts of tables silent too long (`store.alerts.raise_silent_tables`),
    each counted once committed."""
    raised = raise_silent_tables(
        session, timeout_seconds=timeout_seconds, silent_timeouts=silent_timeouts, now=now
    )
    for alert in raised:
        _count(session, alert.kind, RAISED)
    return raised


def _count(session: Session, kind: str, outcome: str) -> None:
    """`tms_alerts_total` once `session`'s transaction commits."""
    at_commit(session, lambda: metrics.ALERTS.labels(kind, outcome).inc())
