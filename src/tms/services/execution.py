"""What every plan execution shares: recovery of an earlier crashed attempt, the move to
inflight, a heartbeat while it runs, and the figures it reports."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from tms.hudi.errors import PlanNotFoundError
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import transition
from tms.services.rollback import rollback_inflight


@dataclass
class ServiceResult:
    """Figures of one execution, reported to callers and to the service."""

    action: str
    instant: str
    state: str = "COMPLETED"
    file_groups: int = 0
    files_written: int = 0
    files_deleted: int = 0
    bytes_written: int = 0
    records_written: int = 0
    log_files_compacted: int = 0
    log_records_compacted: int = 0
    rolled_back: list[str] = field(default_factory=list)
    duration_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pending_plan(table: HudiTable, instant_time: str, actions: tuple[Action, ...]) -> Instant:
    """The pending instant of a plan, or PlanNotFoundError saying what is there instead."""
    timeline = table.timeline()
    instant = timeline.get(instant_time)
    wanted = "/".join(a.value for a in actions)
    if instant is None:
        raise PlanNotFoundError(f"no {wanted} plan at instant {instant_time} on the timeline")
    if instant.is_completed:
        raise PlanNotFoundError(f"{wanted} {instant_time} has already completed")
    if timeline.origin_action(instant) not in actions and instant.action not in actions:
        raise PlanNotFoundError(
            f"instant {instant_time} is a {instant.action.value}, not a {wanted} plan"
        )
    return instant


@contextmanager
def executing(
    table: HudiTable,
    instant: Instant,
    result: ServiceResult,
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
) -> Iterator[Instant]:
    """Run a pending plan's execution: yields the inflight instant, heartbeating meanwhile.

    An inflight instant left by a crashed attempt is rolled back first (its partial files
    deleted, its state back to requested); a live heartbeat means another job runs it and
    raises `InstantInFlightError`. The body completes the instant itself, since only it
    knows the metadata.
    """
    started = time.monotonic()
    if instant.state is State.INFLIGHT:
        rolled = rollback_inflight(table, instant, heartbeat_interval=heartbeat_interval)
        result.rolled_back.append(rolled.rollback_instant)
        instant = Instant(instant.requested_time, instant.action, State.REQUESTED)
    with heartbeat.Heartbeat(table.storage, instant.requested_time, heartbeat_interval):
        inflight = transition(table.storage, table.config, instant, State.INFLIGHT)
        yield inflight
    result.duration_seconds = round(time.monotonic() - started, 3)
