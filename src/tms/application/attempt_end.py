"""How an attempt ended decides its operation's next status, in one place.

A job's result, a job process that exited without reporting, a launch that failed and a lease
that expired all end here. `finish_attempt` locks the operation while the attempt still holds
its lease and decides between completion, a retry after `Backoff`'s delay and a final status;
the store's guarded transitions then move the operation, end the attempt and record the event,
and this module notes the outcome's log line (`outcome_log`) and raises the alert of an
operation that FAILED (`alerts.outcomes`), all in the caller's transaction.

The retry rule: an operation retries while it allows retries (`retry_on_error`) and has some
left (`run_times <= max_retries`, a lost attempt counting as one), unless a cancel is pending.
A job's failure retries only when the job said another attempt may help (`retryable`); a
process that exited without reporting always may; a lost attempt with a cancel pending is
CANCELLED.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from tms.alerts.outcomes import alert_failed_operation
from tms.application.outcome_log import note_outcome, note_transition
from tms.backoff import Backoff
from tms.store import (
    Attempt,
    Operation,
    OperationStatus,
    complete_operation,
    expired_lease_attempts,
    fail_attempt,
    finish_cancelled,
    invalidate_operation,
    lock_running_operation,
    lose_attempt,
)

__all__ = [
    "AttemptEnd",
    "Completed",
    "Exited",
    "Failed",
    "Finished",
    "LaunchFailed",
    "Lost",
    "PlanInvalid",
    "StoppedOnCancel",
    "finish_attempt",
    "reap_expired_leases",
]

S = OperationStatus
JOB_SUCCEEDED = "the job reported success"
STOPPED_ON_CANCEL = "cancelled by request"
LOST = {
    S.SCHEDULED: "lost, retry scheduled",
    S.FAILED: "lost, out of retries",
    S.CANCELLED: "lost, cancelled",
}
"""What a lost attempt meant for its operation, by the status it moved to (its log line)."""


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
class StoppedOnCancel:
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


AttemptEnd = Completed | Failed | Exited | LaunchFailed | StoppedOnCancel | PlanInvalid | Lost


@dataclass(frozen=True)
class Finished:
    """The operation after its attempt ended, and that attempt."""

    operation: Operation
    attempt: Attempt


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
    delay = timedelta(seconds=backoff.delay(operation.run_times))
    retry_at = delay if now is None else now + delay
    match end:
        case Completed(figures=figures, exit_code=exit_code):
            moved = _complete(session, attempt, figures, exit_code)
        case Failed(error=error, retryable=retryable, exit_code=exit_code, figures=figures):
            moved = _fail(
                session, operation, attempt, error, retryable, retry_at, exit_code, figures
            )
        case Exited(error=error, exit_code=exit_code) if operation.cancel_requested:
            moved = _stopped(session, attempt, error, exit_code)
        case Exited(error=error, exit_code=exit_code):
            moved = _fail(session, operation, attempt, error, True, retry_at, exit_code)
        case LaunchFailed(error=error, retryable=retryable):
            moved = _fail(
                session, operation, attempt, f"launch failed: {error}", retryable, retry_at
            )
        case StoppedOnCancel(error=error, exit_code=exit_code):
            moved = _stopped(session, attempt, error, exit_code)
        case PlanInvalid(reason=reason):
            moved = invalidate_operation(session, operation.id, reason=reason)
            note_transition(session, moved, S.RUNNING, reason=reason, attempt=attempt)
        case Lost():
            moved = _lost(session, operation, attempt, retry_at, now)
    return Finished(moved, attempt)


def reap_expired_leases(
    session: Session,
    *,
    backoff: Backoff,
    now: datetime | None = None,
    limit: int = 100,
) -> list[Finished]:
    """End as LOST the attempts whose lease expired, up to `limit` at a time (oldest expiry
    first; rows another transaction holds are skipped, not waited on). Each operation goes
    back to SCHEDULED after a backoff delay while it has retries left, to FAILED when it has
    none, and to CANCELLED if a cancel was requested. The next attempt rolls back what the
    lost one left on storage."""
    reaped = []
    for attempt in expired_lease_attempts(session, now=now, limit=limit):
        finished = finish_attempt(session, attempt, Lost(), backoff=backoff, now=now)
        if finished is not None:
            reaped.append(finished)
    return reaped


def _may_retry(operation: Operation) -> bool:
    return operation.retry_on_error and operation.run_times <= operation.max_retries


def _lost_to(operation: Operation) -> OperationStatus:
    if operation.cancel_requested:
        return S.CANCELLED
    return S.SCHEDULED if _may_retry(operation) else S.FAILED


def _complete(
    session: Session, attempt: Attempt, figures: dict[str, Any] | None, exit_code: int | None
) -> Operation:
    """The job reported success: the operation COMPLETED, with its figures as its result."""
    moved = complete_operation(
        session, attempt, result=figures or None, figures=figures, exit_code=exit_code
    )
    note_transition(session, moved, S.RUNNING, detail=JOB_SUCCEEDED, attempt=attempt)
    return moved


def _stopped(
    session: Session, attempt: Attempt, error: str | None, exit_code: int | None
) -> Operation:
    """The job stopped on a cancel request (or its process ended with one pending)."""
    moved = finish_cancelled(
        session, attempt, error=error, exit_code=exit_code, reason=STOPPED_ON_CANCEL
    )
    note_transition(
        session, moved, S.RUNNING, reason=STOPPED_ON_CANCEL, detail=error, attempt=attempt
    )
    return moved


def _lost(
    session: Session,
    operation: Operation,
    attempt: Attempt,
    retry_at: datetime | timedelta,
    now: datetime | None,
) -> Operation:
    """The attempt's lease expired: retried, failed for good (alerted) or cancelled."""
    moved = lose_attempt(
        session, operation, attempt, to=_lost_to(operation), retry_at=retry_at, now=now
    )
    label = LOST[moved.status]  # the log gives the expiry `lose_attempt` kept as its error
    note_outcome(session, moved, label, attempt.error or label, attempt=attempt)
    if moved.status is S.FAILED:
        alert_failed_operation(session, moved, attempt, now=now)
    return moved


def _fail(
    session: Session,
    operation: Operation,
    attempt: Attempt,
    error: str,
    retryable: bool,
    retry_at: datetime | timedelta,
    exit_code: int | None = None,
    figures: dict[str, Any] | None = None,
) -> Operation:
    """The attempt FAILED: the operation retries at `retry_at` when the failure is
    `retryable`, the operation may retry and no cancel is pending; else it FAILED."""
    retry = retryable and _may_retry(operation) and not operation.cancel_requested
    if retry:
        reason = f"attempt {operation.run_times} failed; retry {operation.run_times} of "
        reason += f"{operation.max_retries}"
    else:
        reason = "failed, out of retries" if retryable else "failed"
    moved = fail_attempt(
        session,
        attempt,
        error=error,
        exit_code=exit_code,
        figures=figures,
        retry_at=retry_at if retry else None,
        reason=reason,
    )
    note_transition(session, moved, S.RUNNING, reason=reason, detail=error, attempt=attempt)
    if moved.status is S.FAILED:
        alert_failed_operation(session, moved, attempt)
    return moved
