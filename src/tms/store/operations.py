"""Operations: idempotent submission, lookups, listing, removal and counts.

Submission is `INSERT … ON CONFLICT DO NOTHING` against the unique key (tbl_id, action,
instant), or, without an instant, against the partial unique index that allows one pending
plan-less operation per table and action; on conflict the existing row is returned. Status
changes live in `transitions`, claiming in `claiming`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tms.executor_choice import AUTO
from tms.store.cancelled_plans import abort_due_on_cancel
from tms.store.errors import NotFound, OperationConflict, TransitionRefused
from tms.store.events import record_event
from tms.store.models import UNPLANNED, Operation, OperationStatus, ServiceAction, Tbl
from tms.store.wakeups import notify_due

__all__ = [
    "OperationState",
    "Submitted",
    "count_operations",
    "find_operation",
    "get_operation",
    "instant_planned_here",
    "list_operations",
    "lock_operation",
    "operation_states",
    "queue_depth",
    "remove_operation",
    "set_operation_instant",
    "submit_operation",
    "waiting_plans",
]

S = OperationStatus
# The arbiter of ON CONFLICT for an unplanned operation is the partial index
# `ux_operation_unplanned`: PostgreSQL infers it only from a predicate that implies the
# index's, so it is given as the index's own SQL.
_UNPLANNED_WHERE = text(UNPLANNED)


@dataclass(frozen=True)
class Submitted:
    """The operation, and whether this call created it (False: it existed already)."""

    operation: Operation
    created: bool


def submit_operation(
    session: Session,
    *,
    tbl_id: int,
    action: ServiceAction,
    instant: str | None = None,
    engine: str = "spark",
    owner: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    resource: str | None = None,
    parallelism: int | None = None,
    extra_params: dict[str, Any] | None = None,
    retry_on_error: bool = True,
    max_retries: int = 3,
    cancellable: bool = True,
    executor: str = AUTO,
    run_at: datetime | timedelta | None = None,
    reason: str = "submitted",
) -> Submitted:
    """Create a SCHEDULED operation, or return the one that already exists for this table,
    action and instant (without an instant: the pending one that will plan itself).

    `queue` and `priority` default to the table's; `executor` is the choice as resolved by
    the caller (`tms.application`). Raises `NotFound` for an unknown table.
    A removed operation with the same instant is returned as it is (`is_deleted` set).
    """
    table = session.execute(select(Tbl.queue, Tbl.priority).where(Tbl.id == tbl_id)).one_or_none()
    if table is None:
        raise NotFound("table", tbl_id)
    values: dict[str, Any] = {
        "tbl_id": tbl_id,
        "action": action,
        "instant": instant,
        "engine": engine,
        "owner": owner,
        "queue": queue if queue is not None else table.queue,
        "priority": priority if priority is not None else table.priority,
        "resource": resource,
        "parallelism": parallelism,
        "extra_params": extra_params or {},
        "retry_on_error": retry_on_error,
        "max_retries": max_retries,
        "cancellable": cancellable,
        "executor": executor,
    }
    if run_at is not None:
        values["next_run_at"] = func.now() + run_at if isinstance(run_at, timedelta) else run_at
    stmt = insert(Operation).values(values)
    if instant is None:
        stmt = stmt.on_conflict_do_nothing(
            index_elements=[Operation.tbl_id, Operation.action], index_where=_UNPLANNED_WHERE
        )
    else:
        stmt = stmt.on_conflict_do_nothing(
            index_elements=[Operation.tbl_id, Operation.action, Operation.instant]
        )
    for _ in range(3):
        created = session.scalars(stmt.returning(Operation)).one_or_none()
        if created is not None:
            record_event(session, created.id, None, S.SCHEDULED, reason)
            notify_due(session)
            return Submitted(created, True)
        existing = _existing(session, tbl_id, action, instant)
        if existing is not None:
            return Submitted(existing, False)
        # The conflicting row finished or was removed in between: insert again.
    raise RuntimeError(f"submit of {action} {instant} for table {tbl_id} kept conflicting")


def resubmit_cancelled(session: Session, cancelled: Operation) -> Submitted:
    """A retry of a CANCELLED operation: a new operation of the same table, action and
    settings that plans anew (CANCELLED is terminal; an aborted plan is never run again).
    Retrying again returns the same new operation while it waits to plan."""
    return submit_operation(
        session,
        tbl_id=cancelled.tbl_id,
        action=cancelled.action,
        engine=cancelled.engine,
        owner=cancelled.owner,
        queue=cancelled.queue,
        priority=cancelled.priority,
        resource=cancelled.resource,
        parallelism=cancelled.parallelism,
        extra_params=dict(cancelled.extra_params or {}),
        retry_on_error=cancelled.retry_on_error,
        max_retries=cancelled.max_retries,
        cancellable=cancelled.cancellable,
        executor=cancelled.executor,
        reason=f"retry of cancelled operation {cancelled.id}",
    )


def _existing(
    session: Session, tbl_id: int, action: ServiceAction, instant: str | None
) -> Operation | None:
    stmt = select(Operation).where(Operation.tbl_id == tbl_id, Operation.action == action)
    if instant is None:
        stmt = stmt.where(
            Operation.instant.is_(None),
            Operation.status.in_([S.SCHEDULED, S.RUNNING]),
            Operation.is_deleted.is_(False),
        )
    else:
        stmt = stmt.where(Operation.instant == instant)
    return session.scalars(stmt.execution_options(populate_existing=True)).one_or_none()


def get_operation(session: Session, operation_id: int) -> Operation:
    operation = session.get(Operation, operation_id)
    if operation is None:
        raise NotFound("operation", operation_id)
    return operation


def find_operation(
    session: Session, *, tbl_id: int, action: ServiceAction, instant: str
) -> Operation | None:
    return _existing(session, tbl_id, action, instant)


def instant_planned_here(session: Session, base_path: str, instant: str) -> bool:
    """Whether tms has an operation for `instant` on the table at `base_path` (a plan it
    runs, scheduled by itself or handed over by a writer): such an instant's markers come
    only from tms's own jobs."""
    found = session.scalar(
        select(Operation.id)
        .join(Tbl, Tbl.id == Operation.tbl_id)
        .where(Tbl.base_path == base_path, Operation.instant == instant)
        .limit(1)
    )
    return found is not None


def _conditions(
    *,
    tbl_id: int | None,
    status: OperationStatus | Collection[OperationStatus] | None,
    action: ServiceAction | None,
    include_deleted: bool,
    queue: str | None = None,
) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if queue is not None:
        conditions.append(Operation.queue == queue)
    if tbl_id is not None:
        conditions.append(Operation.tbl_id == tbl_id)
    if isinstance(status, OperationStatus):
        conditions.append(Operation.status == status)
    elif status is not None:
        conditions.append(Operation.status.in_(list(status)))
    if action is not None:
        conditions.append(Operation.action == action)
    if not include_deleted:
        conditions.append(Operation.is_deleted.is_(False))
    return conditions


def list_operations(
    session: Session,
    *,
    tbl_id: int | None = None,
    status: OperationStatus | Collection[OperationStatus] | None = None,
    action: ServiceAction | None = None,
    include_deleted: bool = False,
    limit: int = 50,
    before_id: int | None = None,
    queue: str | None = None,
) -> list[Operation]:
    """Newest first (id descending, a stable keyset): pass the last id of a page as
    `before_id` to get the next one. Indexes on (tbl_id, id) and (status, id) serve it."""
    stmt = select(Operation).where(
        *_conditions(
            tbl_id=tbl_id,
            status=status,
            action=action,
            include_deleted=include_deleted,
            queue=queue,
        )
    )
    if before_id is not None:
        stmt = stmt.where(Operation.id < before_id)
    return list(session.scalars(stmt.order_by(Operation.id.desc()).limit(limit)))


def count_operations(
    session: Session,
    *,
    tbl_id: int | None = None,
    status: OperationStatus | Collection[OperationStatus] | None = None,
    action: ServiceAction | None = None,
    include_deleted: bool = False,
) -> dict[tuple[ServiceAction, OperationStatus], int]:
    """Operations per (action, status) with the same filters as `list_operations` (metrics,
    page totals)."""
    stmt = (
        select(Operation.action, Operation.status, func.count())
        .where(
            *_conditions(
                tbl_id=tbl_id, status=status, action=action, include_deleted=include_deleted
            )
        )
        .group_by(Operation.action, Operation.status)
    )
    return {(row[0], row[1]): row[2] for row in session.execute(stmt)}


def queue_depth(session: Session, *, now: datetime | None = None) -> dict[str, int]:
    """Due, claimable operations per queue (what the scheduler has not started yet)."""
    stmt = (
        select(Operation.queue, func.count())
        .where(
            Operation.status == S.SCHEDULED,
            Operation.is_deleted.is_(False),
            Operation.next_run_at <= (now if now is not None else func.now()),
        )
        .group_by(Operation.queue)
    )
    return {row[0]: row[1] for row in session.execute(stmt)}


def waiting_plans(
    session: Session, actions: Collection[ServiceAction], *, after_table: int = 0, limit: int
) -> list[tuple[Operation, Tbl]]:
    """Scheduled operations of `actions` that run a plan already on the table (an instant),
    with their tables, in table order from the table after `after_table`: what a writer's
    cancel request may stop before it runs. At most `limit` (a caller goes round the tables
    by passing the last table it saw)."""
    stmt = (
        select(Operation, Tbl)
        .join(Tbl, Tbl.id == Operation.tbl_id)
        .where(
            Operation.tbl_id > after_table,
            Operation.status == S.SCHEDULED,
            Operation.is_deleted.is_(False),
            Operation.instant.is_not(None),
            Operation.action.in_(list(actions)),
        )
        .order_by(Operation.tbl_id, Operation.id)
        .limit(limit)
    )
    return [(operation, table) for operation, table in session.execute(stmt)]


def set_operation_instant(session: Session, operation_id: int, instant: str) -> Operation:
    """Record the instant a plan-less operation's job scheduled (NULL → instant, once).

    Raises `OperationConflict` if another operation of the table already has it, and
    `TransitionRefused` if this one has another instant or is no longer pending.
    """
    stmt = (
        update(Operation)
        .where(
            Operation.id == operation_id,
            Operation.status.in_([S.SCHEDULED, S.RUNNING]),
            (Operation.instant.is_(None)) | (Operation.instant == instant),
        )
        .values(instant=instant, updated_at=func.now())
        .returning(Operation)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    try:
        with session.begin_nested():
            operation = session.scalars(stmt).one_or_none()
    except IntegrityError as exc:
        raise OperationConflict(
            f"operation {operation_id}: instant {instant} already belongs to another operation"
        ) from exc
    if operation is None:
        current = get_operation(session, operation_id)
        raise TransitionRefused(
            operation_id,
            f"set instant {instant}",
            {S.SCHEDULED, S.RUNNING},
            current.status,
            f"instant is {current.instant}",
        )
    return operation


def lock_operation(session: Session, operation_id: int) -> Operation:
    """The operation, locked for this transaction and read afresh; `NotFound` if unknown."""
    current = session.scalars(
        select(Operation)
        .where(Operation.id == operation_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one_or_none()
    if current is None:
        raise NotFound("operation", operation_id)
    return current


def remove_operation(session: Session, operation_id: int, *, reason: str = "removed") -> Operation:
    """RFC-43 remove: hide the operation (`is_deleted`). A SCHEDULED one is CANCELLED first;
    a RUNNING one is refused (cancel it instead). Removing twice is a no-op."""
    current = lock_operation(session, operation_id)
    if current.status == S.RUNNING:
        raise TransitionRefused(
            operation_id, "remove", set(S) - {S.RUNNING}, current.status, "cancel it first"
        )
    if current.is_deleted:
        return current
    was = current.status
    values: dict[str, Any] = {"is_deleted": True, "updated_at": func.now()}
    if was == S.SCHEDULED:
        values |= {
            "status": S.CANCELLED,
            "finished_at": func.now(),
            "plan_abort_due": abort_due_on_cancel(),
        }
    stmt = (
        update(Operation)
        .where(Operation.id == operation_id)
        .values(values)
        .returning(Operation)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    operation = session.scalars(stmt).one()
    if was == S.SCHEDULED:
        record_event(session, operation_id, S.SCHEDULED, S.CANCELLED, reason)
    return operation


@dataclass(frozen=True)
class OperationState:
    """What a scheduler watching a job needs to know of its operation."""

    id: int
    status: OperationStatus
    current_attempt_id: int | None
    cancel_requested: bool


def operation_states(session: Session, ids: Collection[int]) -> dict[int, OperationState]:
    """Status, running attempt and cancel request of the operations `ids`, by id."""
    rows = session.execute(
        select(
            Operation.id,
            Operation.status,
            Operation.current_attempt_id,
            Operation.cancel_requested,
        ).where(Operation.id.in_(list(ids)))
    ).all()
    return {
        row.id: OperationState(row.id, row.status, row.current_attempt_id, row.cancel_requested)
        for row in rows
    }
