"""The operation history: one row per transition, written in the transition's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from tms.store.models import OperationEvent, OperationStatus

__all__ = ["list_events", "record_event"]


def record_event(
    session: Session,
    operation_id: int,
    from_status: OperationStatus | None,
    to_status: OperationStatus,
    reason: str | None = None,
    *,
    attempt_id: int | None = None,
    at: datetime | None = None,
) -> None:
    """`at` pins the event's time (a test's clock); the database clock otherwise."""
    values: dict[str, Any] = {} if at is None else {"at": at}
    session.execute(
        insert(OperationEvent).values(
            operation_id=operation_id,
            attempt_id=attempt_id,
            from_status=from_status,
            to_status=to_status,
            reason=reason,
            **values,
        )
    )


def list_events(session: Session, operation_id: int) -> list[OperationEvent]:
    """Oldest first."""
    stmt = (
        select(OperationEvent)
        .where(OperationEvent.operation_id == operation_id)
        .order_by(OperationEvent.id)
    )
    return list(session.scalars(stmt))
