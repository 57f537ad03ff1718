"""An operation's whole life, one method per state change, after procrastinate's `JobManager`.

Every caller goes through `OperationManager` and decides nothing itself: the operator's and
RFC-43's routes, the table-service-manager client's calls, commit ingest and the scheduler's
cancel scan for an operation's requests (register its table, create it, submit, cancel,
retry, remove), and the scheduler (spark-submit), the workers' routes (resident workers) and
the jobs' routes for its attempts (claim, launch, heartbeat, the plan's instant, a job's
report, a process's exit, a failed launch, a reaped lease). The requests are decided in their
own modules (`submit`, `cancel`, `retry`, `remove`, `registration`, `triggers`); an attempt's
methods run the store's guarded statements in the caller's session, commit, and only then
count what changed (`observe`), so a rolled-back change never counts and every engine counts
the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from tms import observe
from tms.application.attempt_end import (
    AttemptEnd,
    Completed,
    Exited,
    Failed,
    Finished,
    LaunchFailed,
    PlanInvalid,
    StoppedOnCancel,
    finish_attempt,
    reap_expired_leases,
)
from tms.application.cancel import Cancelled, TableAccess, cancel
from tms.application.chosen_engine import engine_note
from tms.application.refusals import Refused
from tms.application.registration import (
    StorageShows,
    TableRegistration,
    check_auto_register,
    register,
    writer_table_names,
)
from tms.application.remove import remove
from tms.application.retry import retry
from tms.application.submit import CheckedRequest, SubmitRequest, check_request, submit
from tms.application.triggers import apply_triggers
from tms.backoff import Backoff
from tms.config import Settings
from tms.store import (
    SPARK_SUBMIT,
    Attempt,
    AttemptOutcome,
    Claim,
    CountedTable,
    NotFound,
    Operation,
    Registered,
    Submitted,
    Tbl,
    claim_due_operations,
    claim_worker_operations,
    extend_lease,
    holds_lease,
    issue_attempt_token,
    live_worker_queues,
    lock_attempt_operation,
    record_engine,
    record_executor_report,
    record_first_heartbeat,
    record_launch,
    record_progress,
    set_exit_code,
    set_operation_instant,
    worker_seen,
)

__all__ = ["ClaimedJob", "JobReport", "LeaseLost", "OperationManager", "Reported"]


@dataclass(frozen=True)
class ClaimedJob:
    """What launching a claimed attempt needs, copied out of the ORM rows while the claim's
    session is open (the launch happens after its transaction ended)."""

    operation_id: int
    attempt_id: int
    attempt_number: int
    action: str
    engine: str
    queue: str
    resource: str | None
    parallelism: int | None
    extra_params: dict[str, Any]
    executor: str
    run_times: int
    token: str = field(repr=False)

    @classmethod
    def from_claim(cls, claim: Claim, token: str) -> ClaimedJob:
        op, attempt = claim.operation, claim.attempt
        return cls(
            operation_id=op.id,
            attempt_id=attempt.id,
            attempt_number=attempt.number,
            action=op.action.value,
            engine=op.engine,
            queue=op.queue,
            resource=op.resource,
            parallelism=op.parallelism,
            extra_params=dict(op.extra_params or {}),
            executor=op.executor,
            run_times=op.run_times,
            token=token,
        )


class LeaseLost(Refused):
    """The attempt no longer holds its operation's lease (reaped, or the operation ended):
    its job must stop."""

    def __init__(self, attempt: Attempt, operation: Operation) -> None:
        super().__init__(
            f"attempt {attempt.id} no longer holds operation {operation.id} "
            f"(attempt {attempt.outcome}, operation {operation.status}); stop"
        )


@dataclass(frozen=True)
class JobReport:
    """What a job reported at its end: how it ended, its figures, its Spark application."""

    end: Completed | Failed | StoppedOnCancel | PlanInvalid
    figures: Mapping[str, Any]
    spark_app_id: str | None = None


@dataclass(frozen=True)
class Reported:
    """The operation after a job's report, and whether the report was a repeat."""

    operation: Operation
    attempt: Attempt
    outcome: AttemptOutcome
    duplicate: bool


def _reported_outcome(end: AttemptEnd) -> AttemptOutcome:
    """The attempt outcome a report leaves behind (an invalid plan fails the attempt)."""
    if isinstance(end, Completed):
        return AttemptOutcome.SUCCEEDED
    if isinstance(end, StoppedOnCancel):
        return AttemptOutcome.CANCELLED
    return AttemptOutcome.FAILED


class OperationManager:
    """Every transition of an attempt and the operation it runs (see the module doc)."""

    def __init__(self, settings: Settings, *, backoff: Backoff | None = None) -> None:
        self.settings = settings
        self.backoff = backoff or Backoff.from_settings(settings)

    # an operation's requests -------------------------------------------------------------

    def check_request(self, request: SubmitRequest) -> CheckedRequest:
        """What a submit may carry, checked before anything is stored (`Refused` if not)."""
        return check_request(request, self.settings)

    def submit(self, session: Session, table: Tbl, checked: CheckedRequest) -> list[Submitted]:
        """Create the requested operations (idempotent per instant); committed."""
        return submit(session, table, checked, self.settings)

    def create_due(
        self, session: Session, tables: Iterable[CountedTable]
    ) -> dict[int, list[Operation]]:
        """Create the operations the tables' trigger policies make due, in the caller's
        transaction (the one that stored the commits that counted); per table id."""
        return apply_triggers(session, tables, self.settings)

    def cancel(
        self,
        session: Session,
        operation_ids: Sequence[int],
        *,
        reason: str,
        table: TableAccess | None,
    ) -> list[Cancelled]:
        """Cancel the operations (a running one's job is asked to stop); committed, and the
        cancel request written on the table through `table` for a scheduled plan."""
        return cancel(session, operation_ids, reason=reason, table=table)

    def retry(self, session: Session, operation_id: int, *, reason: str) -> Operation:
        """Run a FAILED operation again, or a CANCELLED one as a new operation; committed."""
        return retry(session, operation_id, reason=reason)

    def remove(
        self, session: Session, operation_id: int, *, reason: str, table: TableAccess
    ) -> Operation:
        """Hide the operation (a waiting one is cancelled first; a running one is refused:
        cancel it); committed."""
        return remove(session, operation_id, reason=reason, table=table)

    def register(self, session: Session, registration: TableRegistration) -> Registered:
        """Register the table (idempotent), with what storage shows of it; in the caller's
        transaction."""
        return register(session, registration)

    def check_auto_register(self, name: str) -> None:
        """`AutoRegistrationOff` unless a table a writer names (`name`) may be registered."""
        check_auto_register(self.settings, name)

    def register_for_writer(
        self,
        session: Session,
        *,
        base_path: str,
        info: StorageShows | None,
        db_name: str | None = None,
        table_name: str | None = None,
        owner: str | None = None,
    ) -> Registered:
        """Register the table a writer names (its commit callback, its table-service-manager
        client) under the names it gave, else those storage shows (`writer_table_names`);
        storage this service cannot read (`info` None) does not refuse it."""
        db_name, table_name = writer_table_names(
            base_path, info, db_name=db_name, table_name=table_name
        )
        registration = TableRegistration(db_name, table_name, base_path, info=info, owner=owner)
        return register(session, registration)

    # claiming ------------------------------------------------------------------------

    def claim_for_instance(
        self, session: Session, instance_id: str, *, limit: int
    ) -> list[ClaimedJob]:
        """Claim up to `limit` due operations for this instance's spark-submit launches (the
        rest of those live workers serve), each attempt with its token, committed before any
        launch; the lease covers the launch's grace too."""
        settings = self.settings
        worker_queues = live_worker_queues(
            session, within=timedelta(seconds=settings.worker_timeout_seconds)
        )
        claims = claim_due_operations(
            session,
            instance_id,
            limit=limit,
            queue_limits=settings.queue_limits,
            lease_seconds=settings.lease_seconds + settings.launch_grace_seconds,
            worker_queues=worker_queues,
            owner_limits=settings.owner_limits,
            table_runs_per_hour=settings.table_runs_per_hour,
        )
        for claim in claims:
            note = engine_note(claim.operation, claim.operation.table, worker_queues)
            record_engine(session, [claim.attempt.id], SPARK_SUBMIT, note=note)
        return self._issue(session, claims)

    def claim_for_worker(
        self, session: Session, worker_id: str, *, free: int, busy: int, log_dir: str | None
    ) -> list[ClaimedJob]:
        """The worker called in: note it alive and `busy`, and claim up to `free` (at most its
        slots) due operations it can run, each attempt with its token and, with `log_dir`,
        the log path the worker writes. `NotFound` when the worker is not registered."""
        worker = worker_seen(session, worker_id, busy=busy)
        if worker is None:
            session.rollback()
            raise NotFound("worker", worker_id)
        claims = claim_worker_operations(
            session,
            worker,
            limit=min(free, worker.slots),
            queue_limits=self.settings.queue_limits,
            lease_seconds=self.settings.lease_seconds,
            owner_limits=self.settings.owner_limits,
            table_runs_per_hour=self.settings.table_runs_per_hour,
        )
        if log_dir:
            for claim in claims:
                path = f"{log_dir.rstrip('/')}/{claim.operation.id}/{claim.attempt.id}.log"
                record_launch(session, claim.attempt, log_path=path)
        return self._issue(session, claims)

    def _issue(self, session: Session, claims: Sequence[Claim]) -> list[ClaimedJob]:
        """Tokens in the claim's transaction (a committed attempt always has one); commit;
        count each operation's move to RUNNING and its wait."""
        jobs = [ClaimedJob.from_claim(c, issue_attempt_token(session, c.attempt)) for c in claims]
        seen = [observe.ClaimSeen.of(c) for c in claims]
        session.commit()
        observe.attempts_claimed(seen)
        return jobs

    # a running attempt ----------------------------------------------------------------

    def launched(self, session: Session, launches: Mapping[int, str]) -> None:
        """The engine started these attempts' jobs, logging to these paths (by attempt id)."""
        for attempt_id, log_path in launches.items():
            record_launch(session, session.get_one(Attempt, attempt_id), log_path=log_path)
        session.commit()

    def heartbeat(
        self, session: Session, attempt: Attempt, progress: dict[str, Any] | None = None
    ) -> Operation:
        """Extend the lease by `lease_seconds` and keep the job's `progress`; the operation
        tells the job whether a cancel was requested. `LeaseLost` when the attempt lost it."""
        before = session.get_one(Operation, attempt.operation_id)
        # The claim set the last heartbeat to the attempt's start: none since means first.
        first = (
            before.last_heartbeat_at is not None and before.last_heartbeat_at <= attempt.started_at
        )
        operation = extend_lease(session, attempt, lease_seconds=self.settings.lease_seconds)
        if operation is None or operation.lease_expires_at is None:
            raise LeaseLost(attempt, session.get_one(Operation, attempt.operation_id))
        if first:
            record_first_heartbeat(session, attempt)
        if progress is not None:
            record_progress(session, attempt.id, progress)
        session.commit()
        if first:
            observe.first_heartbeat(attempt.engine, attempt.started_at, operation.last_heartbeat_at)
        return operation

    def plan_scheduled(self, session: Session, attempt: Attempt, instant: str) -> Operation:
        """The job scheduled the operation's plan itself at `instant` (operations submitted
        without one). `LeaseLost` when the attempt lost its lease."""
        operation = lock_attempt_operation(session, attempt)
        if not holds_lease(attempt, operation):
            raise LeaseLost(attempt, operation)
        operation = set_operation_instant(session, operation.id, instant)
        session.commit()
        return operation

    def require_lease(self, session: Session, attempt: Attempt) -> Operation:
        """The attempt's operation, while the attempt holds its lease; else `LeaseLost`."""
        operation = session.get_one(Operation, attempt.operation_id)
        if not holds_lease(attempt, operation):
            raise LeaseLost(attempt, operation)
        return operation

    # an attempt's end -------------------------------------------------------------------

    def report(self, session: Session, attempt: Attempt, report: JobReport) -> Reported:
        """The job reported how it ended: the operation completes, retries after a backoff,
        fails, is cancelled or invalidated. The same report again is a repeat (`duplicate`);
        another report once the lease is lost is `LeaseLost`."""
        operation = lock_attempt_operation(session, attempt)
        outcome = _reported_outcome(report.end)
        if not holds_lease(attempt, operation):
            if attempt.outcome is outcome:
                return Reported(operation, attempt, attempt.outcome, duplicate=True)
            raise LeaseLost(attempt, operation)
        figures = dict(report.figures)
        record_executor_report(session, operation.id, figures)
        if report.spark_app_id:
            record_launch(session, attempt, spark_app_id=report.spark_app_id)
        finished = finish_attempt(session, attempt, report.end, backoff=self.backoff)
        assert finished is not None  # the lease was checked under the same lock
        session.commit()
        operation = finished.operation
        observe.attempt_finished(operation, attempt, executor=figures.get("executor"))
        table, action = operation.table.qualified_name, operation.action.value
        observe.record_storage_requests(table, action, figures.get("storage_requests"))
        observe.record_foreign_markers(table, action, figures.get("foreign_markers"))
        return Reported(operation, attempt, outcome, duplicate=False)

    def killed_after_reap(self, session: Session, attempt_id: int, code: int) -> None:
        """A job whose lease was reaped (its attempt already LOST) was killed: only its exit
        code is kept."""
        set_exit_code(session, attempt_id, code)
        session.commit()

    def exited(self, session: Session, attempt_id: int, code: int, error: str) -> None:
        """The job's process ended with `code`: kept on the attempt; an attempt still holding
        its lease (its job never reported) ends as `Exited` (cancelled if a cancel was
        pending, else failed and retried)."""
        set_exit_code(session, attempt_id, code)
        self._finish(session, session.get_one(Attempt, attempt_id), Exited(error, code))

    def launch_failed(
        self, session: Session, attempt_id: int, error: str, *, retryable: bool
    ) -> bool:
        """The engine could not start the attempt's job: it fails, retried after a backoff
        when `retryable`. False when the attempt had already finished elsewhere."""
        end = LaunchFailed(error, retryable=retryable)
        return self._finish(session, session.get_one(Attempt, attempt_id), end)

    def reap(self, session: Session) -> list[Finished]:
        """End as LOST the attempts whose lease expired (their operations retried after a
        backoff, failed or cancelled). A scheduler tick and a worker's claim both reap: an
        instance may run no scheduler."""
        reaped = reap_expired_leases(session, backoff=self.backoff)
        session.commit()
        for lost in reaped:
            observe.attempt_finished(lost.operation, lost.attempt)
        return reaped

    def _finish(self, session: Session, attempt: Attempt, end: AttemptEnd) -> bool:
        finished = finish_attempt(session, attempt, end, backoff=self.backoff)
        session.commit()
        if finished is None:  # it reported, or its lease was reaped: nothing to add
            return False
        observe.attempt_finished(finished.operation, finished.attempt)
        return True
