"""Guarded status transitions of operations, each recorded in `operation_event`.

Every transition is one `UPDATE … WHERE id = :id AND status IN (<expected>) RETURNING`, so
of two instances (or an operator and a job) racing on one operation exactly one wins and the
other gets `TransitionRefused`. Transitions out of RUNNING also name the attempt: a job whose
lease was reaped and whose operation was claimed again can no longer finish it.

Each applies a status the application decided (`tms.application`: an attempt's end, a
cancel, a retry), which also writes the outcome's log line and raises the alerts.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, literal, select, update
from sqlalchemy.orm import Session

from tms.store.cancelled_plans import abort_due_on_cancel
from tms.store.errors import NotFound, TransitionRefused
from tms.store.events import record_event
from tms.store.models import Attempt, AttemptOutcome, Operation, OperationStatus

__all__ = [
    "cancel_scheduled",
    "complete_operation",
    "fail_attempt",
    "finish_cancelled",
    "invalidate_operation",
    "lock_running_operation",
    "lose_attempt",
    "request_cancel_of_running",
    "reschedule_operation",
    "retry_operation",
]

S = OperationStatus
LEASE_CLEARED: dict[str, Any] = {
    "lease_owner": None,
    "lease_expires_at": None,
    "current_attempt_id": None,
}


def clock(now: datetime | None) -> ColumnElement[datetime]:
    """The database clock, unless a caller (a test) pins it."""
    return func.now() if now is None else literal(now)


def when(at: datetime | timedelta | None, now: datetime | None = None) -> ColumnElement[datetime]:
    """A time on the database clock: now, now + delay, or an absolute time."""
    if at is None:
        return clock(now)
    if isinstance(at, timedelta):
        return clock(now) + literal(at)
    return literal(at)


def lock_running_operation(
    session: Session, operation_id: int, attempt_id: int
) -> Operation | None:
    """Lock the operation while `attempt_id` is its RUNNING attempt; None once it is not
    (the job reported, or its lease was reaped and another attempt took over)."""
    return session.scalars(
        select(Operation)
        .where(
            Operation.id == operation_id,
            Operation.status == S.RUNNING,
            Operation.current_attempt_id == attempt_id,
        )
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one_or_none()


def transition(
    session: Session,
    operation_id: int,
    *,
    wanted: str,
    expected: Collection[OperationStatus],
    to: OperationStatus,
    values: dict[str, Any] | None = None,
    reason: str | None = None,
    attempt: Attempt | None = None,
    now: datetime | None = None,
) -> Operation:
    """One guarded transition and its event (`attempt`, when given, must hold the lease)."""
    conditions = [Operation.id == operation_id, Operation.status.in_(list(expected))]
    if attempt is not None:
        conditions.append(Operation.current_attempt_id == attempt.id)
    # Lock and read the old status in a CTE: with several expected statuses the event must
    # say which one we left, and RETURNING only sees the new row.
    old = select(Operation.id, Operation.status).where(*conditions).with_for_update().cte("old")
    extra = dict(values or {})
    if to.terminal:
        extra.setdefault("finished_at", clock(now))
    if to is S.CANCELLED:
        extra.setdefault("plan_abort_due", abort_due_on_cancel())
    stmt = (
        update(Operation)
        .where(Operation.id == old.c.id)
        .values(status=to, updated_at=clock(now), **extra)
        .returning(Operation, old.c.status)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    row = session.execute(stmt).one_or_none()
    if row is None:
        raise _refused(session, operation_id, wanted, expected, attempt)
    operation: Operation = row[0]
    record_event(
        session,
        operation.id,
        OperationStatus(row[1]),
        to,
        reason,
        attempt_id=attempt.id if attempt is not None else None,
        at=now,
    )
    return operation


def _refused(
    session: Session,
    operation_id: int,
    wanted: str,
    expected: Collection[OperationStatus],
    attempt: Attempt | None,
) -> Exception:
    row = session.execute(
        select(Operation.status, Operation.current_attempt_id).where(Operation.id == operation_id)
    ).one_or_none()
    if row is None:
        return NotFound("operation", operation_id)
    detail = ""
    if attempt is not None and row.status in expected:
        detail = f"attempt {attempt.id} no longer holds the lease"
    return TransitionRefused(operation_id, wanted, expected, row.status, detail)


def finish_attempt_row(
    session: Session,
    attempt: Attempt,
    outcome: AttemptOutcome,
    *,
    error: str | None = None,
    exit_code: int | None = None,
    figures: dict[str, Any] | None = None,
    now: datetime | None = None,
) -> None:
    values: dict[str, Any] = {"outcome": outcome, "finished_at": clock(now)}
    if error is not None:
        values["error"] = error
    if exit_code is not None:
        values["exit_code"] = exit_code
    if figures is not None:
        values["figures"] = figures
    session.execute(
        update(Attempt)
        .where(Attempt.id == attempt.id, Attempt.outcome == AttemptOutcome.RUNNING)
        .values(**values)
        .returning(Attempt.id)
        .execution_options(populate_existing=True, synchronize_session="fetch")
    )


def complete_operation(
    session: Session,
    attempt: Attempt,
    *,
    result: dict[str, Any] | None = None,
    figures: dict[str, Any] | None = None,
    exit_code: int | None = 0,
) -> Operation:
    """RUNNING → COMPLETED for the attempt holding the lease; the attempt SUCCEEDED."""
    operation = transition(
        session,
        attempt.operation_id,
        wanted="complete",
        expected={S.RUNNING},
        to=S.COMPLETED,
        values={**LEASE_CLEARED, "result": result, "cancel_requested": False},
        reason="completed",
        attempt=attempt,
    )
    finish_attempt_row(
        session, attempt, AttemptOutcome.SUCCEEDED, exit_code=exit_code, figures=figures
    )
    return operation


def fail_attempt(
    session: Session,
    attempt: Attempt,
    *,
    error: str,
    exit_code: int | None = None,
    figures: dict[str, Any] | None = None,
    retry_at: datetime | timedelta | None = None,
    reason: str = "failed",
) -> Operation:
    """The attempt FAILED: RUNNING → SCHEDULED at `retry_at` (a time, or a delay on the
    database clock), or RUNNING → FAILED without one (`application.attempt_end` decides).
    The error is kept on the attempt and as the operation's `last_error` either way."""
    values: dict[str, Any] = {**LEASE_CLEARED, "last_error": error}
    if retry_at is not None:
        values |= {"next_run_at": when(retry_at), "scheduled_at": func.now()}
    operation = transition(
        session,
        attempt.operation_id,
        wanted="fail",
        expected={S.RUNNING},
        to=S.FAILED if retry_at is None else S.SCHEDULED,
        values=values,
        reason=reason,
        attempt=attempt,
    )
    finish_attempt_row(
        session, attempt, AttemptOutcome.FAILED, error=error, exit_code=exit_code, figures=figures
    )
    return operation


def lose_attempt(
    session: Session,
    operation: Operation,
    attempt: Attempt,
    *,
    to: OperationStatus,
    retry_at: datetime | timedelta,
    now: datetime | None = None,
) -> Operation:
    """The attempt's lease expired: it is LOST (the expiry kept as its error), and its
    operation (locked by the caller) RUNNING → `to` (SCHEDULED at `retry_at`, FAILED or
    CANCELLED)."""
    expired = operation.lease_expires_at
    heartbeat = operation.last_heartbeat_at
    detail = f"lease expired at {expired} (last heartbeat {heartbeat or 'never'})"
    error = f"{attempt.error}\n{detail}" if attempt.error else detail
    values: dict[str, Any] = {
        **LEASE_CLEARED,
        "last_error": f"attempt {attempt.id} lost: lease expired at {expired}",
    }
    if to is S.SCHEDULED:
        values |= {
            "next_run_at": when(retry_at, now),
            "scheduled_at": clock(now),
            "finished_at": None,
        }
    moved = transition(
        session,
        operation.id,
        wanted="reap",
        expected={S.RUNNING},
        to=to,
        values=values,
        reason="lease expired",
        attempt=attempt,
        now=now,
    )
    finish_attempt_row(session, attempt, AttemptOutcome.LOST, error=error, now=now)
    return moved


def finish_cancelled(
    session: Session,
    attempt: Attempt,
    *,
    error: str | None = None,
    exit_code: int | None = None,
    reason: str = "cancelled by request",
) -> Operation:
    """The job stopped on a cancel request (and rolled its plan back): RUNNING → CANCELLED."""
    operation = transition(
        session,
        attempt.operation_id,
        wanted="finish cancelled",
        expected={S.RUNNING},
        to=S.CANCELLED,
        values=dict(LEASE_CLEARED),
        reason=reason,
        attempt=attempt,
    )
    finish_attempt_row(session, attempt, AttemptOutcome.CANCELLED, error=error, exit_code=exit_code)
    return operation


def cancel_scheduled(session: Session, operation_id: int, *, reason: str) -> Operation:
    """SCHEDULED → CANCELLED at once (`application.cancel` decides a cancel)."""
    return transition(
        session,
        operation_id,
        wanted="cancel",
        expected={S.SCHEDULED},
        to=S.CANCELLED,
        reason=reason,
    )


def request_cancel_of_running(session: Session, operation_id: int, *, reason: str) -> Operation:
    """RUNNING stays RUNNING with `cancel_requested` (recorded as an event) until its job
    stops; `TransitionRefused` once it is not RUNNING (`application.cancel` decides a
    cancel)."""
    stmt = (
        update(Operation)
        .where(Operation.id == operation_id, Operation.status == S.RUNNING)
        .values(cancel_requested=True, updated_at=func.now())
        .returning(Operation)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    operation = session.scalars(stmt).one_or_none()
    if operation is None:
        raise _refused(session, operation_id, "request cancel", {S.RUNNING}, None)
    record_event(
        session,
        operation_id,
        S.RUNNING,
        S.RUNNING,
        f"cancel requested: {reason}",
        attempt_id=operation.current_attempt_id,
    )
    return operation


def invalidate_operation(session: Session, operation_id: int, *, reason: str) -> Operation:
    """Its plan vanished from the timeline: SCHEDULED|RUNNING → INVALID. A running attempt
    is marked FAILED with the same reason."""
    # Lock first: a claim between reading the attempt and the update would escape us.
    current = session.scalars(
        select(Operation.current_attempt_id).where(Operation.id == operation_id).with_for_update()
    ).one_or_none()
    attempt = session.get(Attempt, current) if current is not None else None
    operation = transition(
        session,
        operation_id,
        wanted="invalidate",
        expected={S.SCHEDULED, S.RUNNING},
        to=S.INVALID,
        values={**LEASE_CLEARED, "last_error": reason},
        reason=reason,
    )
    if attempt is not None:
        finish_attempt_row(session, attempt, AttemptOutcome.FAILED, error=reason)
    return operation


def retry_operation(
    session: Session,
    operation_id: int,
    *,
    reason: str = "retried by operator",
    at: datetime | timedelta | None = None,
) -> Operation:
    """FAILED|CANCELLED → SCHEDULED with a fresh retry budget (`run_times` back to 0;
    attempt numbers keep counting)."""
    return transition(
        session,
        operation_id,
        wanted="retry",
        expected={S.FAILED, S.CANCELLED},
        to=S.SCHEDULED,
        values={
            "run_times": 0,
            "next_run_at": when(at),
            "scheduled_at": func.now(),
            "finished_at": None,
            "cancel_requested": False,
        },
        reason=reason,
    )


def reschedule_operation(
    session: Session, operation_id: int, *, at: datetime | timedelta, reason: str
) -> Operation:
    """Move a SCHEDULED operation's due time (SCHEDULED → SCHEDULED, recorded)."""
    return transition(
        session,
        operation_id,
        wanted="reschedule",
        expected={S.SCHEDULED},
        to=S.SCHEDULED,
        values={"next_run_at": when(at)},
        reason=reason,
    )
