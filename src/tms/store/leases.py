"""An attempt's lease: whether it still holds its operation, and the attempts whose lease ran
out (the reaper's work, `application.attempt_end.reap_expired_leases`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from tms.store.models import Attempt, AttemptOutcome, Operation, OperationStatus
from tms.store.transitions import clock

__all__ = ["expired_lease_attempts", "holds_lease", "lock_attempt_operation"]


def lock_attempt_operation(session: Session, attempt: Attempt) -> Operation:
    """The attempt's operation, locked, with the attempt re-read under that lock: the reaper
    changes both in one transaction, so what the caller sees next is consistent."""
    operation = session.scalars(
        select(Operation)
        .where(Operation.id == attempt.operation_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one()
    session.refresh(attempt)
    return operation


def holds_lease(attempt: Attempt, operation: Operation) -> bool:
    """Whether `attempt` is still its operation's running attempt (its job may go on)."""
    return (
        attempt.outcome is AttemptOutcome.RUNNING
        and operation.status is OperationStatus.RUNNING
        and operation.current_attempt_id == attempt.id
    )


def expired_lease_attempts(
    session: Session, *, now: datetime | None = None, limit: int = 100
) -> list[Attempt]:
    """The running attempts whose lease expired, up to `limit` (oldest expiry first), their
    operations locked until the caller's transaction ends; rows another transaction holds
    are skipped, not waited on."""
    expired = session.execute(
        select(Operation.id, Operation.current_attempt_id)
        .where(
            Operation.status == OperationStatus.RUNNING,
            Operation.lease_expires_at < clock(now),
            Operation.current_attempt_id.is_not(None),
        )
        .order_by(Operation.lease_expires_at, Operation.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    return [
        session.get_one(Attempt, row.current_attempt_id, populate_existing=True) for row in expired
    ]
