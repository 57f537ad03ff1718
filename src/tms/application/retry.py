"""Retrying an operation: a FAILED one runs again; a CANCELLED one is terminal (its plan may
be aborted on the table), so its retry is a new operation that plans anew."""

from __future__ import annotations

from sqlalchemy.orm import Session

from tms import observe
from tms.application.outcome_log import note_transition
from tms.application.refusals import NotRetryable
from tms.store import Operation, OperationStatus, get_operation, resubmit_cancelled, retry_operation

__all__ = ["retry"]


def retry(session: Session, operation_id: int, *, reason: str) -> Operation:
    """FAILED → SCHEDULED, due now, with a fresh retry budget; CANCELLED → the new operation
    (the same one again while it waits to plan); committed. `NotRetryable` for a removed
    operation, `TransitionRefused` for any other status."""
    operation = get_operation(session, operation_id)
    if operation.is_deleted:
        raise NotRetryable(f"operation {operation_id} was removed; submit it again")
    if operation.status is OperationStatus.CANCELLED:
        submitted = resubmit_cancelled(session, operation)
        session.commit()
        if submitted.created:
            observe.operation_moved(submitted.operation)
        return submitted.operation
    operation = retry_operation(session, operation_id, reason=reason)
    # Moved from FAILED (the statement moves FAILED or CANCELLED, both logged as retried).
    note_transition(session, operation, OperationStatus.FAILED, reason=reason)
    session.commit()
    observe.operation_moved(operation)
    return operation
