"""What a clean finishes before it plans: cancelled and stale cancellable plans (RFC-79), and,
when asked, failed writes (Hudi's lazy failed-writes policy).

RFC-79 leaves to clean the plans nobody will finish: every plan with a cancel request
(`.hoodie/.cancel/<instant>`) is aborted, and a cancellable plan pending longer than the
cancellation policy allows (hours since it was requested, or write instants completed
since) is requested for cancellation and aborted. A plan whose job still beats is left for a
later clean, as RFC-79 requires.

Hudi's clean under `hoodie.clean.failed.writes.policy=LAZY` also rolls back writes that
failed: inflight commits and delta commits whose writer stopped beating. `tms` does so only
when asked (`rollback_failed_writes`), and only for instants with a heartbeat file that went
stale: a writer under the default EAGER policy does not beat at all, and its inflight write
may be running.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tms.hudi.errors import CancelRefusedError, InstantInFlightError
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests, heartbeat
from tms.hudi.timeline.instant import INSTANT_TIME_FORMAT, Instant
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline
from tms.services.plan_cancel import execute_cancel, request_cancel
from tms.services.rollback import rollback_inflight

__all__ = ["CleanRollbacks", "finish_before_clean"]

log = logging.getLogger(__name__)


@dataclass
class CleanRollbacks:
    """What `finish_before_clean` did, by instant."""

    aborted: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    """Instants it would have finished but a live heartbeat or a refusal kept."""

    @property
    def changed(self) -> tuple[list[str], list[str]]:
        return self.aborted, self.rolled_back


def finish_before_clean(
    table: HudiTable,
    timeline: Timeline,
    *,
    cancel_after_hours: float | None = None,
    cancel_after_instants: int | None = None,
    rollback_failed_writes: bool = False,
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
    now: float | None = None,
) -> CleanRollbacks:
    """Abort the plans with a cancel request and the stale cancellable ones, then roll back
    failed writes if asked; `timeline` is the table's as the clean found it."""
    done = CleanRollbacks()
    stale = _stale_cancellable(timeline, cancel_after_hours, cancel_after_instants, now)
    for instant in stale:
        try:
            request_cancel(table, instant.requested_time)
        except CancelRefusedError as exc:
            log.info("not cancelling stale plan %s: %s", instant.requested_time, exc)
    for instant_time in cancel_requests.cancel_requests(table.storage):
        try:
            outcome = execute_cancel(table, instant_time, heartbeat_interval=heartbeat_interval)
        except (InstantInFlightError, CancelRefusedError) as exc:
            log.info("cancel of %s left for a later clean: %s", instant_time, exc)
            done.left.append(instant_time)
            continue
        if outcome.state == "ABORTED":
            done.aborted.append(instant_time)
    if rollback_failed_writes:
        for instant in _failed_writes(table, table.timeline(), heartbeat_interval):
            try:
                rollback_inflight(table, instant, heartbeat_interval=heartbeat_interval)
            except InstantInFlightError:
                done.left.append(instant.requested_time)
                continue
            done.rolled_back.append(instant.requested_time)
    return done


def _stale_cancellable(
    timeline: Timeline,
    after_hours: float | None,
    after_instants: int | None,
    now: float | None,
) -> list[Instant]:
    """Pending cancellable compaction and clustering plans past the cancellation policy."""
    if after_hours is None and after_instants is None:
        return []
    now = time.time() if now is None else now
    writes = [i.requested_time for i in timeline.completed(WRITE_COMMIT_ACTIONS)]
    stale = []
    for instant in timeline.pending_compactions() + timeline.pending_clusterings():
        if not cancel_requests.is_cancellable(timeline, instant):
            continue
        age_hours = (now - _epoch_seconds(instant.requested_time)) / 3600
        since = sum(1 for ts in writes if ts > instant.requested_time)
        if (after_hours is not None and age_hours >= after_hours) or (
            after_instants is not None and since >= after_instants
        ):
            stale.append(instant)
    return stale


def _failed_writes(
    table: HudiTable, timeline: Timeline, heartbeat_interval: float
) -> list[Instant]:
    """Inflight writes (not table service plans) whose heartbeat file went stale."""
    failed = []
    tolerance = heartbeat_interval * heartbeat.DEFAULT_TOLERABLE_MISSES
    for instant in timeline.pending_writes():
        beat = heartbeat.last_beat(table.storage, instant.requested_time)
        if beat is not None and time.time() - beat > tolerance:
            failed.append(instant)
    return failed


def _epoch_seconds(instant_time: str) -> float:
    moment = datetime.strptime(instant_time[:14], INSTANT_TIME_FORMAT).replace(tzinfo=UTC)
    return moment.timestamp() + int(instant_time[14:17] or 0) / 1000
