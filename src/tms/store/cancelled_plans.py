"""Cancelled operations whose plans may still be pending on the table.

Every move to CANCELLED marks an operation that runs a plan on the timeline
(`plan_abort_due`): its job may have been stopped before it could cancel the plan itself
(still starting Spark, killed, cut off). The scheduler aborts those plans
(`tms.scheduler.cancelled_plans`) and clears the mark; until then no operation of the same
table and action that would plan is claimed, so a retry never plans around a plan left
behind.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, select, update
from sqlalchemy.orm import Session

from tms.store.models import Operation, OperationStatus, ServiceAction, Tbl

__all__ = ["PLANNED", "abort_due_on_cancel", "plan_settled", "plans_to_abort", "still_to_abort"]

PLANNED = (ServiceAction.COMPACTION, ServiceAction.CLUSTERING)
"""The actions whose operations run a plan that is an instant on the timeline."""


def abort_due_on_cancel() -> ColumnElement[bool]:
    """`plan_abort_due` of an operation moving to CANCELLED: whether it has a plan on the
    table (an `UPDATE`'s SET value, read from the row itself)."""
    return and_(Operation.instant.is_not(None), Operation.action.in_(PLANNED))


def still_to_abort(operation: Any = Operation) -> ColumnElement[bool]:
    """Whether `operation` (the mapped class, or an alias of its table) is a cancelled
    operation whose plan is still to abort: the one test of the sweep and the claim gate."""
    columns = getattr(operation, "c", operation)
    return and_(columns.plan_abort_due, columns.status == OperationStatus.CANCELLED)


def plans_to_abort(session: Session, *, limit: int) -> list[tuple[Operation, Tbl]]:
    """Cancelled operations whose plans are still to be aborted, with their tables, oldest
    first."""
    stmt = (
        select(Operation, Tbl)
        .join(Tbl, Tbl.id == Operation.tbl_id)
        .where(still_to_abort())
        .order_by(Operation.id)
        .limit(limit)
    )
    return [(operation, table) for operation, table in session.execute(stmt)]


def plan_settled(session: Session, operation_id: int) -> bool:
    """Clear the operation's mark: its plan is aborted, done, gone, or one that cannot be
    cancelled. False when it was clear already."""
    stmt = (
        update(Operation)
        .where(Operation.id == operation_id, Operation.plan_abort_due)
        .values(plan_abort_due=False)
        .returning(Operation.id)
    )
    return session.execute(stmt).first() is not None
