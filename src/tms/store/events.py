"""The operation history: one row per transition, written in the transition's transaction."""

from __future__ import annotations

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
) -> None:
    session.execute(
        insert(OperationEvent).values(
            operation_id=operation_id,
            attempt_id=attempt_id,
            from_status=from_status,
            to_status=to_status,
            reason=reason,
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
