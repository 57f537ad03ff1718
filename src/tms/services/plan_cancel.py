"""Cancelling cancellable plans on the table (RFC-79): `request_cancel`, `execute_cancel`,
and the checks an execution makes so that a cancelled plan never completes.

The checks and the state changes that must not interleave (a cancel request against a plan
completing, an abort against a job still writing) run under the table lock; the rollback of
the plan's partial files runs between them, outside it, as the RFC's `execute_cancel` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from tms.hudi.errors import CancelRefusedError, InstantInFlightError, PlanCancelledError
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests, heartbeat
from tms.hudi.timeline.instant import State
from tms.services.rollback import rollback_inflight

__all__ = [
    "CancelOutcome",
    "check_not_cancelled",
    "execute_cancel",
    "request_cancel",
]


@dataclass(frozen=True)
class CancelOutcome:
    """What `execute_cancel` found and did."""

    instant: str
    state: str
    """`ABORTED` (now or before), or `COMPLETED` / `GONE` for a stale request it removed."""
    rolled_back: str | None = None
    """The rollback instant that deleted the plan's partial files, if it wrote any."""


def request_cancel(table: HudiTable, instant_time: str) -> bool:
    """RFC-79 `request_cancel` under the table lock: True when this call wrote the request.
    `CancelRefusedError` for a completed, unknown or not cancellable plan."""
    with table.lock.hold(table.storage):
        return cancel_requests.request_cancel(table.storage, table.config, instant_time)


def check_not_cancelled(table: HudiTable, instant_time: str) -> None:
    """The pre-commit check: `PlanCancelledError` when a cancel was requested. The caller
    holds the table lock until its instant completes, so no request can come in between."""
    if cancel_requests.is_cancel_requested(table.storage, instant_time):
        raise PlanCancelledError(
            instant_time, f"a cancel was requested ({cancel_requests.cancel_path(instant_time)})"
        )


def execute_cancel(
    table: HudiTable,
    instant_time: str,
    *,
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
    tolerable_misses: int = heartbeat.DEFAULT_TOLERABLE_MISSES,
) -> CancelOutcome:
    """RFC-79 `execute_cancel`: roll back a cancel-requested plan's partial files and move it
    to the aborted state. A request for an instant that completed or left the timeline is
    stale and only removed; `InstantInFlightError` while a job still runs the plan (its
    heartbeat is alive); `CancelRefusedError` without a cancel request, or for a plan that
    is not cancellable (a writer may have written a request for it all the same)."""
    storage = table.storage
    with table.lock.hold(table.storage):
        timeline = table.timeline()
        instant = timeline.get(instant_time)
        if instant is None or instant.is_completed or instant.is_aborted:
            cancel_requests.clear_cancel_request(storage, instant_time)
            state = "GONE" if instant is None else instant.state.name
            return CancelOutcome(instant_time, state)
        if not cancel_requests.is_cancel_requested(storage, instant_time):
            request = cancel_requests.cancel_path(instant_time)
            raise CancelRefusedError(f"no cancel was requested for {instant_time} ({request})")
        if not cancel_requests.is_cancellable(timeline, instant):
            raise CancelRefusedError(
                f"{timeline.origin_action(instant).value} plan {instant_time} is not "
                f"cancellable: its cancel request ({cancel_requests.cancel_path(instant_time)}) is "
                "ignored and the plan runs to completion"
            )
        if heartbeat.is_alive(storage, instant_time, heartbeat_interval, tolerable_misses):
            raise InstantInFlightError(
                f"instant {instant_time} has a live heartbeat (a job is running it): it may "
                "be aborted once that job stops"
            )
    rolled_back = None
    if instant.state is State.INFLIGHT:
        rolled = rollback_inflight(
            table,
            instant,
            heartbeat_interval=heartbeat_interval,
            tolerable_misses=tolerable_misses,
        )
        rolled_back = rolled.rollback_instant
    with table.lock.hold(table.storage):
        timeline = table.timeline()
        current = timeline.get(instant_time)
        if current is None or not current.is_pending:
            cancel_requests.clear_cancel_request(storage, instant_time)
            return CancelOutcome(instant_time, "GONE" if current is None else current.state.name)
        cancel_requests.abort(storage, table.config, timeline, current)
    return CancelOutcome(instant_time, State.ABORTED.name, rolled_back)
