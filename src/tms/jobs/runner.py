"""One attempt of a table service, as the spark-submit target runs it.

fetch spec → heartbeat thread → schedule the plan if the operation has no instant yet
(report it) → execute on the SparkSession spark-submit made → report the result with its
figures, among them the storage requests of the work, its Spark tasks' included
(`storage_requests`: requests per kind, whatever the outcome). The work runs in its own
thread so that a lost lease stops the job at once even while the work is blocked inside
Spark. The job never touches the database.

Outcomes: PlanNotFoundError → INVALID (unless the plan already completed, on the data table's
timeline or, for PlanCompletedError, whichever holds it: a retry after a lost report, so
SUCCEEDED); unsupported table or unusable input → FAILED, not retryable; anything else →
FAILED, retryable. The error reported is the exception's class and message
(`error_text`), which every viewer of the operation reads; its traceback, with the
installation's paths, goes to the job's log (the attempt's log file) only.

A service that names its stages tells the job when it enters one a cancel must not stop
(`TableService.hold_stages`); a cancel request after that is logged as too late and the work reports
SUCCEEDED (figure `cancel_too_late`), a cancel before it stops the work as usual.

The heartbeats carry the work's progress (`JobControl.progress`): planning, starting Spark, then
the stages the service enters (`tms.services.progress`) with its file groups done and
planned.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from tms.executor_choice import parse_executor
from tms.hudi.errors import (
    PlanCancelledError,
    PlanCompletedError,
    PlanNotFoundError,
    TableRefusedError,
)
from tms.hudi.locks import use_advisory_locks
from tms.hudi.storage.requests import counting
from tms.hudi.table import HudiTable
from tms.jobs.client import AttemptApi, AttemptGone, JobApiError, JobSpec, Outcome
from tms.jobs.context import attempt_thread
from tms.jobs.control import Heartbeater, JobControl
from tms.jobs.dispatch import (
    execute_plan,
    pending_plans,
    schedule_plan,
    spark_session,
    table_cancel_check,
)
from tms.jobs.job import Job
from tms.jobs.table_lock import ServiceTableLocks
from tms.planning import BadJobInput
from tms.services.conflicts import WriteConflictError
from tms.services.execution import ServiceResult
from tms.services.plan_executor import StageHook
from tms.services.progress import tracking
from tms.testing.fault_pause import pause_point

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_STOPPED",
    "EXIT_UNREPORTED",
    "EXIT_USAGE",
    "JobRunner",
    "Report",
    "error_text",
]

log = logging.getLogger(__name__)

RECANCEL_SECONDS = 1.0
"""How often the Spark jobs of a cancelled work still running are cancelled again."""
EXIT_OK = 0  # a result was reported (succeeded, cancelled, invalid)
EXIT_FAILED = 1  # FAILED was reported
EXIT_USAGE = 2  # bad command line or environment
EXIT_STOPPED = 3  # the attempt is no longer ours (lease lost, token refused)
EXIT_UNREPORTED = 4  # the service could not be told; the scheduler records the failure

Planner = Callable[[Job, HudiTable], str | None]
ExecutePlan = Callable[[Job, HudiTable, str, Any, StageHook], ServiceResult]
SparkFactory = Callable[[JobSpec, str], Any]


@dataclass(frozen=True)
class Report:
    """What the job tells the service at the end (`POST …/result`)."""

    outcome: Outcome
    error: str | None = None
    retryable: bool = False
    figures: dict[str, Any] = field(default_factory=dict)
    spark_app_id: str | None = None


_FRAME = re.compile(r"^\s*(Traceback \(most recent call last\)|File \"|at [\w$.<>]+\()")
"""Where a message turns into a stack trace (Python's, or a JVM's inside a Py4J error)."""


def error_text(exc: BaseException, *, limit: int = 1000) -> str:
    """`Class: message` on one line: the message's lines up to any stack trace in it (a
    Py4J error carries the JVM's), cut to `limit` characters. The traceback is logged."""
    lines: list[str] = []
    for line in str(exc).splitlines():
        if _FRAME.match(line):
            break
        if line.strip():
            lines.append(line.strip())
    message = " ".join(lines)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class JobRunner:
    """Runs one attempt; `run()` returns the process exit code. The planning, execution and
    Spark hooks are parameters so tests can drive the control flow without Spark."""

    client: AttemptApi
    plan: Planner = schedule_plan
    pending: Callable[[HudiTable, str], list[str]] = pending_plans
    execute: ExecutePlan = execute_plan
    spark_factory: SparkFactory = spark_session
    # False where the SparkSession outlives the attempt (a resident worker's): not stopped.
    owns_spark: bool = True
    # After a cancel request, how long the work may take to stop before we report anyway.
    stop_grace_seconds: float = 60.0
    # True when run() returned while the work thread was still busy (exit without cleanup).
    abandoned_work: bool = False
    control: JobControl = field(default_factory=JobControl, repr=False)
    """What stops the work and where it says how far it got; a resident worker names its
    Spark job group, `tms run` its own progress printer."""
    _decision: dict[str, Any] = field(default_factory=dict, repr=False)
    """The executor chosen and why native declined (`ExecutorDecision.figures`), reported
    with any outcome once chosen."""

    def run(self) -> int:
        try:
            spec = self.client.spec()
        except AttemptGone as exc:
            log.error("attempt %s is not ours to run: %s", self.client.attempt_id, exc)
            return EXIT_STOPPED
        except JobApiError as exc:
            log.error("cannot fetch the job spec: %s", exc)
            return EXIT_UNREPORTED
        log.info(
            "attempt %s of operation %s: %s of %s.%s at %s, instant %s",
            spec.attempt_id,
            spec.operation_id,
            spec.action,
            spec.db_name,
            spec.table_name,
            spec.base_path,
            spec.instant or "(to schedule)",
        )
        if spec.cancel_requested:
            return self._report(Report("CANCELLED", error="cancel requested before the job ran"))
        beat = Heartbeater(
            self.client, spec.heartbeat_interval_seconds, self.control, spec.lease_seconds
        )
        beat.start()
        try:
            report = self._run_work(spec)
        finally:
            beat.stop()
        if report is None:
            return EXIT_STOPPED
        code = self._report(report)
        if self.owns_spark and not self.abandoned_work:
            self._stop_spark()
        return code

    def _run_work(self, spec: JobSpec) -> Report | None:
        """The work's report; None when the lease was lost (nothing may be reported)."""
        box: list[Report] = []
        worker = attempt_thread(lambda: box.append(self._work(spec)), "tms-job-work")
        worker.start()
        cancel_seen: float | None = None
        recancelled = 0.0
        while worker.is_alive():
            worker.join(0.2)
            if self.control.lost.is_set():
                self.abandoned_work = worker.is_alive()
                return None
            if self.control.cancelled.is_set() and worker.is_alive():
                cancel_seen = cancel_seen or time.monotonic()
                if time.monotonic() - recancelled >= RECANCEL_SECONDS:
                    # Spark cancels only the jobs running when asked: code that goes on to
                    # start others (Hudi's) has those cancelled too
                    self.control.cancel_spark_jobs()
                    recancelled = time.monotonic()
                if time.monotonic() - cancel_seen > self.stop_grace_seconds:
                    self.abandoned_work = True
                    return Report(
                        "CANCELLED",
                        error="cancel requested; the work did not stop within "
                        f"{self.stop_grace_seconds:g}s and was abandoned",
                    )
        if self.control.lost.is_set():
            return None
        return box[0] if box else Report("FAILED", error="the work ended without a result")

    def _work(self, spec: JobSpec) -> Report:
        # a `postgres` table lock is the service's to take: ask it through the job API
        with (
            counting() as requests,
            use_advisory_locks(ServiceTableLocks(self.client)),
            tracking(self.control.progress),
        ):
            report = self._counted_work(spec)
        report.figures["storage_requests"] = requests.as_dict()
        report.figures.update(self._decision)
        return report

    def _counted_work(self, spec: JobSpec) -> Report:
        job: Job | None = None
        table: HudiTable | None = None
        instant = spec.instant
        scheduling = False
        spark: Any = None
        try:
            job = Job.of(spec)
            table = job.open_table()
            job, decision = job.decide(table)
            self._decision = decision.figures()
            if decision.native_declined:
                log.info("native declined the table: %s", decision.native_declined)
            adopted = False
            if job.direct:  # no plan to adopt or run, whatever the operation names
                scheduling = True
                return self._direct_work(job, table)
            if instant is None:
                scheduling = True
                if job.plans_on_spark:
                    spark = self._start_spark(job, "planning")
                    job = job.with_spark(spark)
                instant, adopted = self._adopt_or_plan(job, table)
                scheduling = False
                if instant is None:
                    log.info("no %s plan to run", spec.action)
                    return Report("SUCCEEDED", figures={"nothing_to_do": True})
            check = table_cancel_check(table, instant)
            if check is not None:
                self.control.watch_table(check)
            self.control.check()
            if spark is None:
                spark = self._start_spark(job, instant)
            result = self.execute(job, table, instant, spark, partial(self._on_stage, job))
            pause_point("committed")
            return self._succeeded(job, instant, result, adopted, spark)
        except Exception as exc:
            return self._failure(exc, spec, job, table, instant, scheduling)

    def _succeeded(
        self, job: Job, instant: str, result: ServiceResult, adopted: bool, spark: Any
    ) -> Report:
        """The report of a plan run to its end, with its figures: whether the plan was a
        pending one the job adopted, and whether a cancel request came too late to stop it."""
        figures = result.to_dict()
        if adopted:
            figures["adopted_pending_plan"] = True
        if self.control.cancel_too_late.is_set() or self.control.cancelled.is_set():
            # held past the cancel, or finished before a Spark job it ran was cancelled
            log.warning("the cancel request came too late: %s %s finished", job.action, instant)
            figures["cancel_too_late"] = True
        return Report("SUCCEEDED", figures=figures, spark_app_id=_app_id(spark))

    def _direct_work(self, job: Job, table: HudiTable) -> Report:
        """The work an operation asks its service to do at once, with no plan: on Spark
        started for it first when the work runs there (Hudi's archiver)."""
        idle = job.direct_idle(table)
        if idle is not None:
            log.info("%s: nothing due, no Spark started: %s", job.action, idle)
            return Report("SUCCEEDED", figures=idle)
        spark = self._start_spark(job, "direct") if job.direct_on_spark else None
        self.control.progress.enter("working without a plan")
        self.control.check()
        figures = job.run_direct(table, spark)
        log.info("%s done without a plan: %s", job.action, figures)
        app_id = _app_id(spark) if spark is not None else None
        return Report("SUCCEEDED", figures=figures, spark_app_id=app_id)

    def _start_spark(self, job: Job, instant: str) -> Any:
        """Spark for the work, started for the spec as decided: its `executor` is the one
        that runs (Hudi's code needs Hudi's bundle on it)."""
        self.control.progress.enter("starting Spark")
        decided = replace(job.spec, executor=parse_executor(job.executor))
        spark = self.spark_factory(decided, instant)
        self.control.attach_spark(spark)
        return spark

    def _on_stage(self, job: Job, stage: str) -> None:
        """Called by the service in the work thread as it enters `stage`. Entering a stage
        the service holds (`Job.holds_stage`) holds the control; a cancel that came before raises
        `JobStopped` here, and the service aborts what it started."""
        log.info("entering stage %s", stage)
        self.control.progress.enter(stage)
        if job.holds_stage(stage):
            self.control.hold(f"stage {stage}")

    def _adopt_or_plan(self, job: Job, table: HudiTable) -> tuple[str | None, bool]:
        """A pending plan no operation tracks (adopted: True), else a new plan; reported
        before it runs."""
        self.control.progress.enter("planning")
        for orphan in self.pending(table, job.action):
            self.control.check()
            if self.client.claim_instant(orphan):
                log.info("adopted pending %s plan %s", job.action, orphan)
                return orphan, True
        instant = self.plan(job, table)
        if instant is None:
            return None, False
        self.control.check()
        if not self.client.claim_instant(instant):
            log.info("%s plan %s belongs to another operation", job.action, instant)
            return None, False
        log.info("scheduled %s plan %s", job.action, instant)
        return instant, False

    def _failure(
        self,
        exc: Exception,
        spec: JobSpec,
        job: Job | None,
        table: HudiTable | None,
        instant: str | None,
        scheduling: bool,
    ) -> Report:
        if isinstance(exc, AttemptGone) or self.control.lost.is_set():
            self.control.lose()
            return Report("FAILED", error=str(exc))  # never sent: the attempt is not ours
        if self.control.cancelled.is_set():
            _roll_back_cancelled(job, table, instant)
            return Report("CANCELLED", error=self.control.cancel_reason)
        if isinstance(exc, PlanCancelledError):
            # found by the service itself (its tasks or its pre-commit check): aborted already
            return Report("CANCELLED", error=str(exc))
        if isinstance(exc, PlanNotFoundError):
            done = isinstance(exc, PlanCompletedError) or (
                table is not None and instant is not None and _completed(table, instant)
            )
            if done:
                figures = {"already_completed": True, "instant": instant}
                return Report("SUCCEEDED", figures=figures)
            return Report("INVALID", error=str(exc))
        log.error("%s failed", spec.action, exc_info=exc)
        permanent = (
            isinstance(exc, BadJobInput | TableRefusedError)
            or (scheduling and isinstance(exc, ValueError | TypeError))
            or (isinstance(exc, WriteConflictError) and not exc.retryable)
        )
        error = error_text(exc)
        if not permanent and not scheduling and _plan_gone(table, instant):
            # An index build aborts its own plan when it fails: a retry of this operation
            # would find nothing to run.
            permanent = True
            error = f"{error} (the {spec.action} plan at {instant} was aborted: submit again)"
        return Report("FAILED", error=error, retryable=not permanent)

    def _report(self, report: Report) -> int:
        log.info("reporting %s%s", report.outcome, f": {report.error}" if report.error else "")
        try:
            self.client.report_result(
                report.outcome,
                error=report.error,
                retryable=report.retryable,
                figures=report.figures,
                spark_app_id=report.spark_app_id,
                retries=10,
            )
        except AttemptGone as exc:
            log.error("the result was refused, the attempt is no longer ours: %s", exc)
            return EXIT_STOPPED
        except JobApiError as exc:
            log.error("cannot report the result: %s", exc)
            return EXIT_UNREPORTED
        return EXIT_FAILED if report.outcome == "FAILED" else EXIT_OK

    def _stop_spark(self) -> None:
        spark = self.control.spark
        if spark is not None:
            try:
                spark.stop()
            except Exception as exc:
                log.warning("stopping Spark failed: %r", exc)


def _app_id(spark: Any) -> str | None:
    try:
        return str(spark.sparkContext.applicationId)
    except Exception:
        return None


def _completed(table: HudiTable, instant: str) -> bool:
    try:
        found = table.timeline().get(instant)
    except Exception:
        return False
    return found is not None and found.is_completed


def _plan_gone(table: HudiTable | None, instant: str | None) -> bool:
    """Whether the plan at `instant` left the timeline (neither pending nor completed)."""
    if table is None or instant is None:
        return False
    try:
        return table.timeline().get(instant) is None
    except Exception:
        return False


def _roll_back_cancelled(job: Job | None, table: HudiTable | None, instant: str | None) -> None:
    """What a cancel stopped is undone by its service (`TableService.cancelled`): a
    compaction or clustering goes back to requested (its files removed), as after a crash; a
    clean is left inflight, since half-deleted files cannot come back and the next clean
    finishes it; an index build goes with its plan."""
    if job is None or table is None or instant is None:
        return
    try:
        job.clean_up_cancelled(table, instant)
        log.info("cleaned up after cancelled %s %s", job.action, instant)
    except Exception as exc:
        log.warning("clean-up of cancelled %s %s failed: %r", job.action, instant, exc)
