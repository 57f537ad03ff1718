"""The scheduler loop: every instance runs one, with no leader.

One tick:
1. heartbeat this instance's row and reap expired leases (one transaction), and release
   the `postgres` table locks held here for jobs whose attempts no longer hold a lease. A reaped
   attempt is LOST; its operation goes back to SCHEDULED after a backoff delay, or to
   FAILED when out of retries (CANCELLED if a cancel was pending). Nothing is rolled back
   here: the service never writes table data, and the next attempt's `executing()` rolls
   the inflight instant back itself once its Hudi heartbeat is dead. A reaped job we still
   run is killed.
2. poll the jobs we launched. A process that ended while its attempt still holds the lease
   died before reporting: the attempt FAILED with its exit code and the tail of its log, and
   the operation is retried after a backoff (or FAILED when out of retries); CANCELLED if a
   cancel was requested. A job asked to stop (cancel requested, or its attempt no longer
   current) that still runs after the grace period is killed.
3. claim up to `max_running_per_instance - running` due operations (priority, then due time;
   per-queue limits; one running operation per table), issuing each attempt its token in
   the claim's transaction, committed before any launch; then launch each through its
   engine and record the log path. A launch that fails fails the attempt (retried with
   backoff unless retrying cannot help).
4. every `heartbeat_interval_seconds`, in the background: abort the plans that cancelled
   operations left on their tables (`scheduler.cancelled_plans`: a job stopped before it
   could cancel its plan itself, as one killed while it still started Spark);
   every `cancel_scan_interval_seconds`, in the background: cancel the waiting operations
   whose plans a writer asked to cancel on the table (`scheduler.cancel_scan`); and, as the
   listing budget allows, pull the tables whose writers went quiet or whose sweep is due
   (`scheduler.pull`); measure the tables whose measurement is due, as its budget allows
   (`scheduler.measure`); and raise and deliver alerts (`alerts.delivery`).
5. metrics: tick time, running jobs, scheduling delay per launch, queue depth (throttled).

Shutdown stops claiming and leaves running jobs alone: they run in their own process
groups, keep heartbeating through any instance's API, and report there; a job that can no
longer reach the service loses its lease and is retried elsewhere. Killing them instead
would throw away work at every rolling restart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from tms import metrics, observe
from tms.alerts import AlertDelivery
from tms.application import ClaimedJob, OperationManager
from tms.backoff import Backoff
from tms.engines.base import LaunchError
from tms.engines.process import tail_log
from tms.scheduler.cancel_scan import CancelScan
from tms.scheduler.cancelled_plans import CancelledPlans
from tms.scheduler.launcher import RunningJob, exit_error, launch_spec
from tms.scheduler.measure import MeasureSweep
from tms.scheduler.pull import PullSweep
from tms.scheduler.wakeup import Wakeup
from tms.store import (
    OperationStatus,
    TableLocks,
    heartbeat_instance,
    list_workers,
    operation_states,
    queue_depth,
    register_instance,
    session_scope,
)

if TYPE_CHECKING:
    from tms.config import Settings
    from tms.engines.engine_names import EngineRegistry

__all__ = ["Scheduler", "TickReport"]

log = logging.getLogger(__name__)


@dataclass
class TickReport:
    """What one tick did (ids of attempts, except `reaped`: operations)."""

    reaped: list[int] = field(default_factory=list)
    exited: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    launched: list[int] = field(default_factory=list)
    launch_failed: list[int] = field(default_factory=list)


class Scheduler:
    """Claims, launches and watches jobs for one service instance (see the module doc)."""

    def __init__(
        self,
        settings: Settings,
        session_factory: sessionmaker[Session],
        engine_registry: EngineRegistry,
        instance_id: str,
        *,
        backoff: Backoff | None = None,
        cancel_grace_seconds: float | None = None,
        queue_depth_interval_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        table_locks: TableLocks | None = None,
    ) -> None:
        self.settings = settings
        self._table_locks = table_locks
        self.cancelled_plans = CancelledPlans(
            session_factory,
            locks=table_locks or TableLocks(session_factory.kw["bind"]),
            interval_seconds=settings.heartbeat_interval_seconds,
            heartbeat_interval_seconds=settings.heartbeat_interval_seconds,
            storage_timeout_seconds=settings.storage_timeout_seconds,
            storage_threads=settings.storage_threads,
            clock=clock,
        )
        self._manager = OperationManager(settings, backoff=backoff)
        self.cancel_scan = CancelScan(
            session_factory,
            self._manager,
            interval_seconds=settings.cancel_scan_interval_seconds,
            storage_timeout_seconds=settings.storage_timeout_seconds,
            storage_threads=settings.storage_threads,
            clock=clock,
        )
        self.alert_delivery = AlertDelivery(session_factory, settings, clock=clock)
        self.instance_id = instance_id
        self.pulls = PullSweep(session_factory, self._manager, instance_id, clock=clock)
        self.measurements = MeasureSweep(session_factory, settings, instance_id, clock=clock)
        self._factory = session_factory
        self._engines = engine_registry
        # A job learns of a cancel at its next heartbeat, then needs time to roll back.
        self._grace = (
            cancel_grace_seconds
            if cancel_grace_seconds is not None
            else 2 * settings.heartbeat_interval_seconds + 10
        )
        self._depth_interval = queue_depth_interval_seconds
        self._depth_at: float | None = None
        self._depth_queues: set[str] = set()
        self._clock = clock
        self._running: dict[int, RunningJob] = {}
        self._claiming = True
        bind = session_factory.kw.get("bind")
        self._wakeup = Wakeup(bind if isinstance(bind, Engine) else None)

    @property
    def running(self) -> Mapping[int, RunningJob]:
        """Jobs this instance launched and still watches, by attempt id."""
        return dict(self._running)

    def run_forever(self, stop_event: threading.Event) -> None:
        """Tick every `scheduler_interval_seconds`, or at once when a new operation becomes
        due (PostgreSQL notification), until `stop_event` is set. A failing tick (database
        down) is logged and the next one tries again."""
        interval = self.settings.scheduler_interval_seconds
        log.info("scheduler %s started (every %gs)", self.instance_id, interval)
        while not stop_event.is_set():
            started = self._clock()
            try:
                self.tick()
            except Exception:
                log.exception("scheduler tick failed")
            self._wakeup.wait(max(0.0, interval - (self._clock() - started)), stop_event)
        self._wakeup.close()
        self._claiming = False
        self.cancel_scan.join(self.settings.storage_timeout_seconds)
        self.cancelled_plans.join(self.settings.storage_timeout_seconds)
        self.alert_delivery.join()
        self.pulls.join(self.settings.storage_timeout_seconds)
        self.measurements.join(self.settings.storage_timeout_seconds)
        log.info(
            "scheduler %s stopped; %d running job(s) left to their leases",
            self.instance_id,
            len(self._running),
        )

    def tick(self) -> TickReport:
        report = TickReport()
        started = self._clock()
        try:
            self._housekeeping(report)
            self._poll(report)
            if self._claiming:
                self._claim_and_launch(report)
                self.cancel_scan.maybe_start()
                self.cancelled_plans.maybe_start()
                self.alert_delivery.maybe_start()
                self.pulls.maybe_start()
                self.measurements.maybe_start()
            self._observe_queue_depth()
        finally:
            metrics.RUNNING_OPERATIONS.set(len(self._running))
            metrics.SCHEDULER_TICK.observe(self._clock() - started)
        return report

    # 1. instance heartbeat and lease reaping -------------------------------------------

    def _housekeeping(self, report: TickReport) -> None:
        lost: list[RunningJob] = []
        with self._factory() as session:  # the manager commits (the instance's heartbeat too)
            if not heartbeat_instance(session, self.instance_id):
                register_instance(session, self.instance_id)
            for reaped in self._manager.reap(session):
                report.reaped.append(reaped.operation.id)
                job = self._running.pop(reaped.attempt.id, None)
                if job is not None:
                    lost.append(job)
            if self._table_locks is not None:  # `postgres` table locks of jobs now gone
                self._table_locks.sweep(session)
        for job in lost:  # hung, or cut off from the service: it must not go on writing
            job.handle.kill()
            report.killed.append(job.attempt_id)
            code = job.handle.poll()
            if code is not None:  # its attempt is LOST already: no error to build from its log
                with self._factory() as session:
                    self._manager.killed_after_reap(session, job.attempt_id, code)

    # 2. watching our jobs ---------------------------------------------------------------

    def _poll(self, report: TickReport) -> None:
        if not self._running:
            return
        ids = {job.operation_id for job in self._running.values()}
        with session_scope(self._factory) as session:
            state = operation_states(session, ids)
        now = self._clock()
        for job in list(self._running.values()):
            code = job.handle.poll()
            if code is None:
                row = state.get(job.operation_id)
                if row is None or row.status != OperationStatus.RUNNING:
                    reason = "its operation is no longer running"
                elif row.current_attempt_id != job.attempt_id:
                    reason = "its attempt no longer holds the lease"
                elif row.cancel_requested:
                    reason = "cancel requested"
                else:
                    job.stop_since = job.stop_reason = None
                    continue
                if job.stop_since is None:
                    job.stop_since, job.stop_reason = now, reason
                if now - job.stop_since < self._grace:
                    continue
                log.warning("killing attempt %s: %s", job.attempt_id, reason)
                job.handle.kill()
                job.killed = True
                report.killed.append(job.attempt_id)
                code = job.handle.poll()
                if code is None:
                    continue  # reaped at a later tick
            self._job_exited(job, code)
            report.exited.append(job.attempt_id)

    def _job_exited(self, job: RunningJob, code: int) -> None:
        del self._running[job.attempt_id]
        error = exit_error(
            code,
            killed_because=job.stop_reason if job.killed else None,
            log_path=job.handle.log_path,
            tail=tail_log(job.handle.log_path),
        )
        with self._factory() as session:
            self._manager.exited(session, job.attempt_id, code, error)

    # 3. claiming and launching ----------------------------------------------------------

    def _claim_and_launch(self, report: TickReport) -> None:
        free = self.settings.max_running_per_instance - len(self._running)
        if free <= 0:
            return
        with self._factory() as session:
            jobs = self._manager.claim_for_instance(session, self.instance_id, limit=free)
        launched: dict[int, str] = {}
        for job in jobs:
            running = self._launch(job)
            if running is None:
                report.launch_failed.append(job.attempt_id)
                continue
            self._running[job.attempt_id] = running
            launched[job.attempt_id] = str(running.handle.log_path)
            report.launched.append(job.attempt_id)
        if launched:
            try:
                with self._factory() as session:
                    self._manager.launched(session, launched)
            except Exception:
                log.exception("could not record launches (the jobs run regardless)")

    def _launch(self, job: ClaimedJob) -> RunningJob | None:
        spec = launch_spec(job, api_url=self.settings.api_url, log_dir=self.settings.job_log_dir)
        try:
            handle = self._engines.get(job.engine).launch(spec)
        except LaunchError as exc:
            self._launch_failed(job, exc)
            return None
        except Exception as exc:  # an engine bug must not stop the loop or lose the attempt
            log.exception("engine %s failed to launch attempt %s", job.engine, job.attempt_id)
            self._launch_failed(job, LaunchError(repr(exc)))
            return None
        log.info(
            "operation %s: launched attempt %s (%s, pid %s, log %s)",
            job.operation_id,
            job.attempt_id,
            job.action,
            handle.pid,
            handle.log_path,
        )
        return RunningJob(job.operation_id, job.attempt_id, job.action, handle)

    def _launch_failed(self, job: ClaimedJob, exc: LaunchError) -> None:
        # The outcome (failed, or a retry scheduled, with the reason) is logged by the store.
        with self._factory() as session:
            ended = self._manager.launch_failed(
                session, job.attempt_id, str(exc), retryable=exc.retryable
            )
        if not ended:
            log.info("attempt %s was finished elsewhere meanwhile", job.attempt_id)

    # 5. metrics -----------------------------------------------------------------------

    def _observe_queue_depth(self) -> None:
        now = self._clock()
        if self._depth_at is not None and now - self._depth_at < self._depth_interval:
            return
        self._depth_at = now
        with session_scope(self._factory) as session:
            depth = queue_depth(session)
            alive = timedelta(seconds=self.settings.worker_timeout_seconds)
            observe.workers_seen(list_workers(session, alive_within=alive))
        for queue in self._depth_queues - depth.keys():
            metrics.QUEUE_DEPTH.labels(queue).set(0)
        for queue, count in depth.items():
            metrics.QUEUE_DEPTH.labels(queue).set(count)
        self._depth_queues |= depth.keys()
