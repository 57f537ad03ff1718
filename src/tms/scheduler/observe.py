"""Metrics of the transitions the scheduler makes (the API records those jobs report)."""

from __future__ import annotations

from datetime import datetime

from tms import metrics
from tms.store.models import Attempt, Operation, OperationStatus

__all__ = ["attempt_ended", "operation_moved", "seconds_between"]


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def operation_moved(operation: Operation) -> None:
    """Count the operation's new status; time it when the status is terminal."""
    action = operation.action.value
    status = OperationStatus(operation.status)
    metrics.OPERATION_TRANSITIONS.labels(action, status.value).inc()
    if status.terminal:
        took = seconds_between(operation.created_at, operation.finished_at)
        if took is not None:
            metrics.OPERATION_DURATION.labels(action, status.value).observe(took)


def attempt_ended(action: str, attempt: Attempt) -> None:
    outcome = attempt.outcome.value
    metrics.ATTEMPTS.labels(action, outcome).inc()
    took = seconds_between(attempt.started_at, attempt.finished_at)
    if took is not None:
        metrics.ATTEMPT_DURATION.labels(action, outcome).observe(took)
