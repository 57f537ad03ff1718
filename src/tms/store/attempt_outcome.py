"""Finishing an attempt: how it ended decides the operation's next status, in one place.

A job's result (API), a job process that exited without reporting, a launch that failed
(scheduler) and a lease that expired (reaper) all end here. `finish_attempt` locks the
operation while the attempt still holds its lease, decides between completion, a retry after
`Backoff`'s delay and a final status, moves the operation, ends the attempt, records the
event and notes the outcome's log line, all in the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tms.store.alerts import raise_operation_failed
from tms.store.models import Attempt, AttemptOutcome, Operation, OperationStatus
from tms.store.retry import Backoff
from tms.store.transitions import (
    LEASE_CLEARED,
    clock,
    complete_operation,
    fail_attempt,
    finish_attempt_row,
    finish_cancelled,
    invalidate_operation,
    lock_running_operation,
    transition,
    when,
)

__all__ = [
    "AttemptEnd",
    "Cancelled",
    "Completed",
    "Exited",
    "Failed",
    "Finished",
    "LaunchFailed",
    "Lost",
    "PlanInvalid",
    "finish_attempt",
    "holds_lease",
    "lock_attempt_operation",
]

S = OperationStatus


@dataclass(frozen=True)
class Completed:
    """The job reported success, with its figures."""

    figures: dict[str, Any] | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class Failed:
    """The job reported a failure; `retryable` says whether another attempt may help."""

    error: str
    retryable: bool
    exit_code: int | None = None
    figures: dict[str, Any] | None = None


@dataclass(frozen=True)
class Exited:
    """The job's process ended without reporting: cancelled if a cancel was pending, else
    failed and retried."""

    error: str
    exit_code: int


@dataclass(frozen=True)
class LaunchFailed:
    """The engine could not start the job."""

    error: str
    retryable: bool


@dataclass(frozen=True)
class Cancelled:
    """The job stopped on a cancel request."""

    error: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class PlanInvalid:
    """The operation's plan vanished from the timeline."""

    reason: str


@dataclass(frozen=True)
class Lost:
    """The attempt's lease expired: its job went silent."""


AttemptEnd = Completed | Failed | Exited | LaunchFailed | Cancelled | PlanInvalid | Lost

# What a lost attempt meant for its operation, by the status it moved to.
_LOST = {
    S.SCHEDULED: "lost, retry scheduled",
    S.FAILED: "lost, out of retries",
    S.CANCELLED: "lost, cancelled",
}


@dataclass(frozen=True)
class Finished:
    """The operation after its attempt ended, and that attempt."""

    operation: Operation
    attempt: Attempt


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


def finish_attempt(
    session: Session,
    attempt: Attempt,
    end: AttemptEnd,
    *,
    backoff: Backoff,
    now: datetime | None = None,
) -> Finished | None:
    """End `attempt` as `end` says; None when it no longer holds its operation's lease
    (it reported already, or was reaped and another attempt took over): nothing to add.
    `now` pins the database clock (tests)."""
    operation = lock_running_operation(session, attempt.operation_id, attempt.id)
    if operation is None:
        return None
    retry_at = _retry_at(backoff, operation.run_times, now)
    match end:
        case Completed(figures=figures, exit_code=exit_code):
            moved = complete_operation(
                session, attempt, result=figures or None, figures=figures, exit_code=exit_code
            )
        case Failed(error=error, retryable=retryable, exit_code=exit_code, figures=figures):
            moved = fail_attempt(
                session,
                attempt,
                error=error,
                exit_code=exit_code,
                figures=figures,
                retry_at=retry_at if retryable else None,
            )
        case Exited(error=error, exit_code=exit_code) if operation.cancel_requested:
            moved = finish_cancelled(session, attempt, error=error, exit_code=exit_code)
        case Exited(error=error, exit_code=exit_code):
            moved = fail_attempt(
                session, attempt, error=error, exit_code=exit_code, retry_at=retry_at
            )
        case LaunchFailed(error=error, retryable=retryable):
            moved = fail_attempt(
                session,
                attempt,
                error=f"launch failed: {error}",
                retry_at=retry_at if retryable else None,
            )
        case Cancelled(error=error, exit_code=exit_code):
            moved = finish_cancelled(session, attempt, error=error, exit_code=exit_code)
        case PlanInvalid(reason=reason):
            moved = invalidate_operation(session, operation.id, reason=reason)
        case Lost():
            moved = _lose(session, operation, attempt, retry_at, now)
    return Finished(moved, attempt)


def _retry_at(backoff: Backoff, run_times: int, now: datetime | None) -> datetime | timedelta:
    delay = timedelta(seconds=backoff.delay(run_times))
    return delay if now is None else now + delay


def _lose(
    session: Session,
    operation: Operation,
    attempt: Attempt,
    retry_at: datetime | timedelta,
    now: datetime | None,
) -> Operation:
    """RUNNING → SCHEDULED after the backoff while retries are left (a lost attempt counts
    as one), else FAILED; CANCELLED when a cancel was pending. The attempt is LOST."""
    expired = operation.lease_expires_at
    heartbeat = operation.last_heartbeat_at
    detail = f"lease expired at {expired} (last heartbeat {heartbeat or 'never'})"
    error = f"{attempt.error}\n{detail}" if attempt.error else detail
    if operation.cancel_requested:
        to = S.CANCELLED
    elif operation.retry_on_error and operation.run_times <= operation.max_retries:
        to = S.SCHEDULED
    else:
        to = S.FAILED
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
        detail=error,
        label=_LOST[to],
        now=now,
    )
    finish_attempt_row(session, attempt, AttemptOutcome.LOST, error=error, now=now)
    if moved.status is S.FAILED:
        raise_operation_failed(session, moved, attempt, now=now)
    return moved
