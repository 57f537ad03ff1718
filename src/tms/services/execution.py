"""What every plan execution shares: the one path of a pending plan's run (`running_plan`:
the refusal of a plan another job's live heartbeat says it runs, what an inflight instant left
by a crashed attempt means, the heartbeat while it runs, the move to inflight, its time), the
figures it reports, and for a cancellable plan (RFC-79) the cancel checks: before it starts,
in its tasks, and before it completes."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from tms.hudi.errors import (
    InstantInFlightError,
    PlanCancelledError,
    PlanCompletedError,
    PlanNotFoundError,
)
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests, heartbeat
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import transition
from tms.services.conflicts import ConflictCheck, WriteConflictError
from tms.services.plan_cancel import check_not_cancelled, execute_cancel, request_cancel
from tms.services.rollback import rollback_inflight

log = logging.getLogger(__name__)


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
    foreign_markers: int = 0
    """Markers naming files the instant did not write (`tms.hudi.files.marked_files`): left
    alone, not deleted."""
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
        raise PlanCompletedError(f"{wanted} {instant_time} has already completed")
    if instant.is_aborted:
        raise PlanCancelledError(instant_time, "the plan was cancelled earlier (it is aborted)")
    if timeline.origin_action(instant) not in actions and instant.action not in actions:
        raise PlanNotFoundError(
            f"instant {instant_time} is a {instant.action.value}, not a {wanted} plan"
        )
    return instant


class Inflight(Enum):
    """What an inflight instant left by a crashed attempt (its heartbeat no longer alive)
    means to the next run of its plan (`PlanRun.inflight`)."""

    ROLL_BACK = "roll back"
    """Its partial files are rolled back and its plan requested again before the heartbeat
    starts (`rollback_inflight`, which refuses a live heartbeat), then it runs from the start:
    compaction and clustering, whose failed attempts Hudi rolls back too."""
    RUN_AGAIN = "run again"
    """It runs again as it stands: a clean, whose deletes cannot be undone and are idempotent
    (Hudi re-executes an inflight clean)."""


@dataclass(frozen=True)
class PlanRun:
    """A pending plan's run as `running_plan` hands it to its executor: the heartbeat on its
    instant while it writes, and the move of that instant to inflight."""

    storage: Storage
    """The storage of the instant's table (the metadata table's, for its compaction)."""
    instant_time: str
    result: ServiceResult
    heartbeat_interval: float

    @contextmanager
    def heartbeating(self) -> Iterator[None]:
        """Heartbeat the instant while the body runs, so no other job runs the plan or rolls
        it back meanwhile; the heartbeat file goes when the body ends. Used alone by a body
        that recovers an inflight instant left by a crash itself, under the heartbeat, and
        moves its instant to inflight when it is ready to (`move_to_inflight`): an index build
        (completed, or aborted back to its plan) and the metadata table's compaction (rolled
        back by `tms.hudi.metadata.compaction`)."""
        with heartbeat.Heartbeat(self.storage, self.instant_time, self.heartbeat_interval):
            yield

    @contextmanager
    def inflight(
        self, table: HudiTable, instant: Instant, crashed: Inflight, plan: bytes = b""
    ) -> Iterator[Instant]:
        """Yield the instant inflight, heartbeating while the body runs. An inflight instant
        left by a crash is rolled back first or run again, as `crashed` says; a requested one
        moves to inflight once the heartbeat started, its file holding `plan` (a clean's
        inflight instant holds its plan again, as Hudi writes it)."""
        if instant.state is State.INFLIGHT and crashed is Inflight.ROLL_BACK:
            rolled = rollback_inflight(
                table, instant, heartbeat_interval=self.heartbeat_interval, keep_plan=True
            )
            self.result.rolled_back.append(rolled.rollback_instant)
            instant = Instant(instant.requested_time, instant.action, State.REQUESTED)
        with self.heartbeating():
            yield move_to_inflight(table, instant, plan)


def move_to_inflight(table: HudiTable, instant: Instant, plan: bytes = b"") -> Instant:
    """A requested instant moved to inflight, its file holding `plan`; an inflight one (run
    again) stays as it is."""
    if instant.state is not State.REQUESTED:
        return instant
    return transition(table.storage, table.config, instant, State.INFLIGHT, plan)


@contextmanager
def running_plan(
    storage: Storage,
    instant_time: str,
    result: ServiceResult,
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
    *,
    busy: str | None,
    started: float | None = None,
) -> Iterator[PlanRun]:
    """Run a pending plan: the one path of every executor of tms's own.

    A live heartbeat on the instant means another job runs the plan: `busy` is what the
    `InstantInFlightError` refusing it says, before anything is written (None where only an
    inflight instant's rollback refuses it: `Inflight.ROLL_BACK`). The body heartbeats the
    instant while it writes (`PlanRun.inflight`, or `PlanRun.heartbeating`), and the run's
    time goes to `result.duration_seconds` when it ends well: from `started` when the
    executor's clock started before this refusal (it checked the plan first), else from now.
    """
    started = time.monotonic() if started is None else started
    if busy is not None and heartbeat.is_alive(storage, instant_time, heartbeat_interval):
        raise InstantInFlightError(busy)
    yield PlanRun(storage, instant_time, result, heartbeat_interval)
    result.duration_seconds = round(time.monotonic() - started, 3)


@contextmanager
def executing(
    table: HudiTable,
    instant: Instant,
    result: ServiceResult,
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
    *,
    cancellable: bool = False,
) -> Iterator[Instant]:
    """Run a pending plan's execution: yields the inflight instant, heartbeating meanwhile.

    An inflight instant left by a crashed attempt is rolled back first (its partial files
    deleted, its state back to requested: `Inflight.ROLL_BACK`); a live heartbeat on it means
    another job runs it and raises `InstantInFlightError`. The body completes the instant
    itself, since only it knows the metadata.

    A `cancellable` plan whose cancel was requested (`.hoodie/.cancel/<instant>`) does not
    start, and a body that finds the request (`PlanCancelledError`, from its tasks or from
    `committing`) stops: once the heartbeat has stopped, its partial files are rolled back
    and the plan is aborted (`execute_cancel`), and the error goes on to the caller.
    """
    ts = instant.requested_time
    with running_plan(table.storage, ts, result, heartbeat_interval, busy=None) as run:
        try:
            if cancellable:
                check_not_cancelled(table, ts)
            with run.inflight(table, instant, Inflight.ROLL_BACK) as inflight:
                yield inflight
        except PlanCancelledError:
            if not cancellable:
                raise
            outcome = execute_cancel(table, ts, heartbeat_interval=heartbeat_interval)
            if outcome.rolled_back:
                result.rolled_back.append(outcome.rolled_back)
            raise


@contextmanager
def committing(
    table: HudiTable,
    instant_time: str,
    *,
    cancellable: bool,
    conflicts: ConflictCheck | None = None,
) -> Iterator[None]:
    """Around the writes that complete an instant: the table lock its writers use, as a Hudi
    writer completes under it; for a cancellable plan also RFC-79's pre-commit check, so that
    a cancel requested before the lock stops the commit and one requested after it finds
    the instant completed and is refused; and the conflict check (RFC-56), which may wait
    for writes in flight before the lock is taken, and looks once more under it."""
    resolve_conflicts(table, conflicts, wait=True)
    with table.lock.hold(table.storage):
        if cancellable:
            check_not_cancelled(table, instant_time)
        resolve_conflicts(table, conflicts, wait=False)
        yield


MAX_CONFLICT_WAIT_SECONDS = 600.0
"""How long a plan that is not cancellable waits for conflicting writes in flight."""
_sleep = time.sleep


def resolve_conflicts(table: HudiTable, check: ConflictCheck | None, *, wait: bool) -> None:
    """Act on other writers touching the plan's file groups (`tms.services.conflicts`): a
    cancellable plan is cancelled on the table (`PlanCancelledError` naming the writer); one
    that is not waits, with backoff, for writes in flight to end when `wait`, and fails with
    `WriteConflictError` for a completed conflicting write (for good) or one still in flight
    (retryable)."""
    if check is None:
        return
    delay, waited = 1.0, 0.0
    while True:
        found = check.conflicts(table)
        if not found:
            return
        reason = "conflict with another writer (RFC-56): " + "; ".join(c.describe() for c in found)
        if check.cancellable:
            request_cancel(table, check.plan_instant)
            raise PlanCancelledError(check.plan_instant, reason)
        if not all(c.in_flight for c in found):
            raise WriteConflictError(
                f"{reason}; the plan is not cancellable and completing it would hide that write",
                retryable=False,
            )
        if not wait or waited >= MAX_CONFLICT_WAIT_SECONDS:
            raise WriteConflictError(
                f"{reason}; still in flight after waiting {waited:g}s", retryable=True
            )
        log.info("%s: waiting %gs", reason, delay)
        _sleep(delay)
        waited += delay
        delay = min(delay * 2, 30.0)


def conflict_in_task(check: ConflictCheck | None) -> bool:
    """A Spark task's conflict check before its file group (RFC-56: the same check as
    before the tasks and at commit, which sees writers' direct markers and the `MARKERS<n>`
    files a timeline server writes). For a cancellable plan, a conflict requests the plan's
    cancel (other tasks then stop at the cheaper cancel check) and returns True, to stop
    without writing. A plan that is not cancellable yields to the writer: the task fails with
    `WriteConflictError`, so the attempt fails (and is retried) before it writes more."""
    if check is None:
        return False
    table = HudiTable.open(check.base_uri, lock=check.lock)
    try:
        resolve_conflicts(table, check, wait=False)
    except PlanCancelledError:
        return True
    return False


def cancel_requested_in_task(base_uri: str, instant_time: str, cancellable: bool) -> bool:
    """A Spark task's check before each file group: whether to stop, leaving the group
    unwritten (one GET of the cancel request; none for a plan that is not cancellable)."""
    if not cancellable:
        return False
    return cancel_requests.is_cancel_requested(Storage(base_uri), instant_time)
