"""RFC-43's remove: hide an operation. A scheduled one is cancelled first, as a cancel
cancels it (RFC-79's request written on the table for its plan); a running one is refused
(cancel it first); removing twice changes nothing."""

from __future__ import annotations

from sqlalchemy.orm import Session

from tms import observe
from tms.application.cancel import TableAccess, request_on_table
from tms.application.outcome_log import note_outcome
from tms.store import Operation, OperationStatus, lock_operation, remove_operation

__all__ = ["remove"]


def remove(session: Session, operation_id: int, *, reason: str, table: TableAccess) -> Operation:
    """Remove the operation and commit; `TransitionRefused` while it runs."""
    before = lock_operation(session, operation_id).status
    removed = remove_operation(session, operation_id, reason=reason)
    if removed.status != before:  # a waiting operation, cancelled by its removal
        note_outcome(session, removed, "cancelled", reason)
    session.commit()
    if removed.status != before:
        observe.operation_moved(removed)
        if removed.status is OperationStatus.CANCELLED:
            request_on_table(session, [removed], table)
    return removed
