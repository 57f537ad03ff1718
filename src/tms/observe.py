"""Metric updates for what the store recorded, shared by the API, ingest and the scheduler.

Callers update metrics once the transaction they describe committed (a rolled-back request or
tick must not count). An attempt's transitions are counted by one function each, called by
`application.manager.OperationManager` alone, whichever engine made them: `attempts_claimed`
(a claim for spark-submit or for a resident worker), `first_heartbeat`, `attempt_finished` (a
job's report, its process's exit, a failed launch, a lease reaped by a scheduler tick or a
worker's claim), so `/metrics` counts the same whatever runs the jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tms import metrics
from tms.executor_choice import HUDI, NATIVE
from tms.store import (
    Attempt,
    Claim,
    Operation,
    OperationStatus,
    ServiceAction,
    TableMeasurement,
    Worker,
)

__all__ = [
    "ClaimSeen",
    "attempt_ended",
    "attempt_finished",
    "attempts_claimed",
    "commit_notified",
    "measurements_seen",
    "operation_moved",
    "operations_created",
    "record_foreign_markers",
    "record_storage_requests",
    "seconds_between",
]


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def commit_notified(source: str, *, new: bool) -> None:
    metrics.COMMIT_NOTIFICATIONS.labels(source, "new" if new else "duplicate").inc()


def operations_created(operations: Iterable[Operation], origin: str) -> None:
    for operation in operations:
        metrics.OPERATIONS_CREATED.labels(operation.action.value, origin).inc()


def operation_moved(operation: Operation) -> None:
    """Count the operation's new status; time it when the status is terminal."""
    action = operation.action.value
    status = OperationStatus(operation.status)
    metrics.OPERATION_TRANSITIONS.labels(action, status.value).inc()
    if status.terminal:
        took = seconds_between(operation.created_at, operation.finished_at)
        if took is not None:
            metrics.OPERATION_DURATION.labels(action, status.value).observe(took)


@dataclass(frozen=True)
class ClaimSeen:
    """What counting a claim needs, read inside the claim's transaction (counted once it
    committed, when its rows may no longer be loaded)."""

    action: str
    due_at: datetime | None
    claimed_at: datetime | None

    @classmethod
    def of(cls, claim: Claim) -> ClaimSeen:
        return cls(
            claim.operation.action.value, claim.operation.next_run_at, claim.attempt.started_at
        )


def attempts_claimed(claims: Iterable[ClaimSeen]) -> None:
    """Each claimed operation's move to RUNNING, and its wait from due to claimed."""
    for claim in claims:
        metrics.OPERATION_TRANSITIONS.labels(claim.action, OperationStatus.RUNNING.value).inc()
        waited = seconds_between(claim.due_at, claim.claimed_at)
        if waited is not None:
            metrics.SCHEDULING_DELAY.labels(claim.action).observe(waited)


def attempt_finished(operation: Operation, attempt: Attempt, executor: str | None = None) -> None:
    """An attempt's end (reported, exited, not launched or reaped) and where it left the
    operation: counted the same whichever engine ran it."""
    operation_moved(operation)
    attempt_ended(
        operation.action.value,
        attempt.outcome.value,
        attempt.started_at,
        attempt.finished_at,
        executor=executor,
    )


def attempt_ended(
    action: str,
    outcome: str,
    started: datetime | None,
    ended: datetime | None,
    executor: str | None = None,
) -> None:
    """Count an attempt's outcome and time it from launch to end, by the executor its job
    reported having run (`none` when it reported none: lost, or refused before choosing)."""
    ran = executor if executor in (NATIVE, HUDI) else "none"
    metrics.ATTEMPTS.labels(action, outcome, ran).inc()
    took = seconds_between(started, ended)
    if took is not None:
        metrics.ATTEMPT_DURATION.labels(action, outcome, ran).observe(took)


def first_heartbeat(engine: str | None, claimed: datetime | None, now: datetime | None) -> None:
    """Time an attempt's launch: from its claim to its job's first heartbeat."""
    took = seconds_between(claimed, now)
    if took is not None:
        metrics.LAUNCH_OVERHEAD.labels(engine or "spark-submit").observe(took)


def workers_seen(workers: Sequence[Worker]) -> None:
    """The live workers and their slots, busy and idle."""
    metrics.WORKERS.set(len(workers))
    busy = sum(min(w.busy, w.slots) for w in workers)
    metrics.WORKER_SLOTS.labels("busy").set(busy)
    metrics.WORKER_SLOTS.labels("idle").set(sum(w.slots for w in workers) - busy)


def record_storage_requests(table: str, action: str, counts: Mapping[str, Any] | None) -> None:
    """Count the storage requests of one piece of work on `table` (`{"LIST": n, …}`, as a job
    reports them in its figures); unknown kinds and values that are no counts are ignored,
    so a job cannot add labels."""
    for kind in metrics.STORAGE_REQUEST_KINDS:
        n = (counts or {}).get(kind)
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            metrics.STORAGE_REQUESTS.labels(table, action, kind).inc(n)


def record_foreign_markers(table: str, action: str, count: Any) -> None:
    """Count the markers a job found naming files its instant did not write (its figure
    `foreign_markers`); anything but a positive count is ignored."""
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        metrics.FOREIGN_MARKERS.labels(table, action).inc(count)


_ACTIONS = frozenset(a.value for a in ServiceAction)


def measurements_seen(latest: Sequence[tuple[str, TableMeasurement]]) -> None:
    """The per-table gauges set from each table's latest measurement (`db.table`, row);
    tables without one, or removed, lose their series. Only known actions become labels."""
    for gauge in metrics.TABLE_MEASUREMENT_GAUGES:
        gauge.clear()
    for table, row in latest:
        metrics.TABLE_MEASURED_AT.labels(table).set(row.measured_at.timestamp())
        _layout_seen(table, row.layout or {})
        writes = row.writes or {}
        metrics.TABLE_COMMITS_PER_HOUR.labels(table).set(_figure(writes, "commits_per_hour"))
        metrics.TABLE_WRITE_BYTES_PER_HOUR.labels(table).set(_figure(writes, "bytes_per_hour"))
        for action, cost in (row.services or {}).items():
            if action in _ACTIONS and isinstance(cost, Mapping):
                seconds = _figure(cost, "executor_seconds")
                metrics.TABLE_SERVICE_EXECUTOR_SECONDS.labels(table, action).set(seconds)
                written = _figure(cost, "bytes_written")
                metrics.TABLE_SERVICE_BYTES_WRITTEN.labels(table, action).set(written)


def _layout_seen(table: str, layout: Mapping[str, Any]) -> None:
    metrics.TABLE_FILE_SLICES.labels(table).set(_figure(layout, "file_slices"))
    metrics.TABLE_SMALL_FILES.labels(table).set(_figure(layout, "small_files"))
    read = layout.get("read_amplification") or {}
    metrics.TABLE_READ_LOG_FILES.labels(table).set(_figure(read, "log_files"))
    metrics.TABLE_READ_LOG_BYTES.labels(table).set(_figure(read, "log_bytes"))
    spreads = (
        (metrics.TABLE_LOG_FILES_PER_SLICE, "log_files_per_slice", ("p50", "p95", "max")),
        (metrics.TABLE_LOG_BYTES_PER_SLICE, "log_bytes_per_slice", ("p50", "p95", "max")),
        (metrics.TABLE_BASE_FILE_BYTES, "base_file_bytes", ("p5", "p50", "p95", "max")),
    )
    for gauge, key, stats in spreads:
        values = layout.get(key) or {}
        for stat in stats:
            gauge.labels(table, stat).set(_figure(values, stat))


def _figure(values: Mapping[str, Any], key: str) -> float:
    value = values.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)
