"""Metric updates the routes make, always after their transaction committed (a rolled-back
request must not count)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from tms import metrics
from tms.store.models import Action, Operation, OperationStatus

__all__ = ["attempt_finished", "commit_notified", "operations_created", "transitioned"]


def commit_notified(source: str, *, new: bool) -> None:
    metrics.COMMIT_NOTIFICATIONS.labels(source, "new" if new else "duplicate").inc()


def operations_created(operations: Iterable[Operation], origin: str) -> None:
    for operation in operations:
        metrics.OPERATIONS_CREATED.labels(operation.action.value, origin).inc()


def transitioned(operation: Operation) -> None:
    """Count the operation's new status; a terminal one also observes its whole duration."""
    action = operation.action.value
    status = OperationStatus(operation.status)
    metrics.OPERATION_TRANSITIONS.labels(action, status.value).inc()
    if status.terminal and operation.finished_at is not None:
        seconds = (operation.finished_at - operation.created_at).total_seconds()
        metrics.OPERATION_DURATION.labels(action, status.value).observe(max(seconds, 0.0))


def attempt_finished(action: Action, outcome: str, started: datetime, ended: datetime) -> None:
    metrics.ATTEMPTS.labels(action.value, outcome).inc()
    seconds = max((ended - started).total_seconds(), 0.0)
    metrics.ATTEMPT_DURATION.labels(action.value, outcome).observe(seconds)
