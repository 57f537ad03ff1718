"""The job side: what a launched job calls, authenticated by its attempt's token.

Contract (shared with the scheduler and `tms.jobs`): 401 when the token is not the one
issued to the attempt in the path; 409 when that attempt no longer holds the operation's
lease (it was reaped, or the operation finished) and the job must stop. A result is
idempotent: sending the same outcome again answers 200 with `duplicate: true`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from tms import observe
from tms.api.deps import JobAttemptDep, SessionDep, SettingsDep
from tms.api.errors import ApiError, error_responses
from tms.api.schemas import (
    HeartbeatIn,
    HeartbeatOut,
    InstantIn,
    InstantOut,
    JobOutcome,
    ResultIn,
    ResultOut,
    SpecOut,
    TableLockOut,
)
from tms.api.schemas.jobs import MAX_ERROR_CHARS
from tms.executors import parse_executor
from tms.hudi.locks import advisory_key
from tms.policies.triggers import table_wide_params
from tms.store import (
    Attempt,
    AttemptEnd,
    AttemptOutcome,
    Backoff,
    Cancelled,
    Completed,
    Failed,
    Operation,
    OperationStatus,
    PlanInvalid,
    TableLocks,
    Tbl,
    extend_lease,
    finish_attempt,
    holds_lease,
    lock_attempt_operation,
    record_executor_report,
    record_first_heartbeat,
    record_launch,
    set_operation_instant,
)
from tms.store.attempts import record_progress

router = APIRouter(
    prefix="/v1/jobs/attempts/{attempt_id}",
    tags=["jobs"],
    responses=error_responses(
        401,
        409,
        422,
        503,
        _401="not this attempt's job token",
        _409="the attempt lost its lease: stop",
    ),
)

_BODY = error_responses(400, 413)
"""Routes with a body."""
# The attempt outcome each reported outcome leaves behind (an invalid plan fails the attempt).
_ATTEMPT_OUTCOME = {
    JobOutcome.SUCCEEDED: AttemptOutcome.SUCCEEDED,
    JobOutcome.FAILED: AttemptOutcome.FAILED,
    JobOutcome.CANCELLED: AttemptOutcome.CANCELLED,
    JobOutcome.INVALID: AttemptOutcome.FAILED,
}


def _lease_lost(attempt: Attempt, operation: Operation) -> ApiError:
    return ApiError.conflict(
        "lease_lost",
        f"attempt {attempt.id} no longer holds operation {operation.id} "
        f"(attempt {attempt.outcome}, operation {operation.status}); stop",
    )


@router.get("/spec", response_model=SpecOut)
def spec(attempt: JobAttemptDep, session: SessionDep, settings: SettingsDep) -> SpecOut:
    """What to run: the operation, its table and its Spark settings."""
    operation = session.get(Operation, attempt.operation_id)
    assert operation is not None  # attempts reference operations (no deletes while running)
    if not holds_lease(attempt, operation):
        raise _lease_lost(attempt, operation)
    table = session.get(Tbl, operation.tbl_id)
    assert table is not None
    return SpecOut(
        attempt_id=attempt.id,
        operation_id=operation.id,
        action=operation.action,
        instant=operation.instant,
        base_path=table.base_path,
        db_name=table.db_name,
        table_name=table.table_name,
        parallelism=operation.parallelism,
        resource=operation.resource,
        extra_params={
            **table_wide_params(table.policy or {}, operation.action),
            **(operation.extra_params or {}),
        },
        heartbeat_interval_seconds=settings.heartbeat_interval_seconds,
        lease_seconds=settings.lease_seconds,
        cancel_requested=operation.cancel_requested,
        storage_options=dict(table.storage_options or {}),
        executor=parse_executor(operation.executor),
    )


@router.post("/heartbeat", response_model=HeartbeatOut, responses=_BODY)
def heartbeat(
    attempt: JobAttemptDep,
    session: SessionDep,
    settings: SettingsDep,
    body: HeartbeatIn | None = None,
) -> HeartbeatOut:
    """Extend the lease by `lease_seconds`; `cancel_requested` tells the job to stop and
    roll back. A `progress` is kept on the attempt (`progress` of its JSON) while it runs."""
    before = session.get(Operation, attempt.operation_id)
    first = (
        before is not None
        and before.last_heartbeat_at is not None
        and before.last_heartbeat_at <= attempt.started_at
    )  # the claim set it to the attempt's start: no beat since
    operation = extend_lease(session, attempt, lease_seconds=settings.lease_seconds)
    if operation is None or operation.lease_expires_at is None:
        current = session.get(Operation, attempt.operation_id)
        assert current is not None
        raise _lease_lost(attempt, current)
    if first:
        record_first_heartbeat(session, attempt)
    if body is not None and body.progress is not None:
        record_progress(session, attempt.id, body.progress.model_dump())
    session.commit()
    if first:
        observe.first_heartbeat(attempt.engine, attempt.started_at, operation.last_heartbeat_at)
    return HeartbeatOut(
        lease_expires_at=operation.lease_expires_at, cancel_requested=operation.cancel_requested
    )


@router.post("/instant", response_model=InstantOut, responses=_BODY)
def report_instant(attempt: JobAttemptDep, body: InstantIn, session: SessionDep) -> InstantOut:
    """The job scheduled the plan itself at this instant (operations submitted without one)."""
    operation = lock_attempt_operation(session, attempt)
    if not holds_lease(attempt, operation):
        raise _lease_lost(attempt, operation)
    operation = set_operation_instant(session, operation.id, body.instant)
    session.commit()
    assert operation.instant is not None
    return InstantOut(operation_id=operation.id, instant=operation.instant)


@router.post("/table-lock", response_model=TableLockOut)
def take_table_lock(attempt: JobAttemptDep, session: SessionDep, request: Request) -> TableLockOut:
    """Take the attempt's table's PostgreSQL advisory lock (`postgres` lock provider) for
    the job, without waiting: `held: false` while another holder has it. The service holds
    it until the job releases it, reports its result, or loses its lease."""
    operation = session.get(Operation, attempt.operation_id)
    assert operation is not None
    if not holds_lease(attempt, operation):
        raise _lease_lost(attempt, operation)
    locks: TableLocks = request.app.state.table_locks
    locks.sweep(session)
    return TableLockOut(held=locks.take_for(attempt.id, advisory_key(operation.table.base_path)))


@router.delete("/table-lock", response_model=TableLockOut)
def release_table_lock(attempt: JobAttemptDep, request: Request) -> TableLockOut:
    """Release the lock the job holds (idempotent: `held: false` afterwards either way)."""
    request.app.state.table_locks.release_for(attempt.id)
    return TableLockOut(held=False)


def _scrub(value: Any) -> Any:
    """PostgreSQL text and JSONB refuse NUL characters; a job's output may contain them."""
    if isinstance(value, str):
        return value.replace("\x00", "\\0")
    if isinstance(value, dict):
        return {_scrub(str(k)): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


@router.post("/result", response_model=ResultOut, responses=_BODY)
def report_result(
    attempt: JobAttemptDep,
    body: ResultIn,
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
) -> ResultOut:
    """Finish the attempt. SUCCEEDED completes the operation; FAILED retries it after a
    backoff when `retryable`, the operation retries on error and has retries left, else
    fails it; CANCELLED cancels it; INVALID (the plan vanished) invalidates it."""
    operation = lock_attempt_operation(session, attempt)
    expected = _ATTEMPT_OUTCOME[body.outcome]
    if not holds_lease(attempt, operation):
        if attempt.outcome is expected:
            return _result_out(attempt, operation, duplicate=True)
        raise _lease_lost(attempt, operation)

    error = _scrub(body.error[:MAX_ERROR_CHARS]) if body.error else None
    figures = _scrub(body.figures)
    record_executor_report(session, operation.id, figures)
    if body.spark_app_id:
        record_launch(session, attempt, spark_app_id=_scrub(body.spark_app_id))
    finished = finish_attempt(
        session,
        attempt,
        _attempt_end(body, error, figures),
        backoff=Backoff.from_settings(settings),
    )
    assert finished is not None  # the lease was checked under the same lock
    operation = finished.operation
    session.commit()
    request.app.state.table_locks.release_for(attempt.id)  # a job that forgot to

    observe.attempt_finished(operation, attempt, executor=figures.get("executor"))
    observe.record_storage_requests(
        operation.table.qualified_name, operation.action.value, figures.get("storage_requests")
    )
    observe.record_foreign_markers(
        operation.table.qualified_name, operation.action.value, figures.get("foreign_markers")
    )
    return _result_out(attempt, operation, duplicate=False, outcome=expected)


def _attempt_end(body: ResultIn, error: str | None, figures: dict[str, Any]) -> AttemptEnd:
    """The store's name for what the job reported."""
    if body.outcome is JobOutcome.SUCCEEDED:
        return Completed(figures=figures)
    if body.outcome is JobOutcome.FAILED:
        return Failed(
            error=error or "the job failed without an error message",
            retryable=body.retryable,
            figures=figures,
        )
    if body.outcome is JobOutcome.CANCELLED:
        return Cancelled(error=error)
    return PlanInvalid(reason=error or "the plan vanished from the timeline")


def _result_out(
    attempt: Attempt,
    operation: Operation,
    *,
    duplicate: bool,
    outcome: AttemptOutcome | None = None,
) -> ResultOut:
    scheduled = operation.status is OperationStatus.SCHEDULED
    return ResultOut(
        operation_id=operation.id,
        attempt_id=attempt.id,
        operation_status=operation.status,
        attempt_outcome=outcome or attempt.outcome,
        next_run_at=operation.next_run_at if scheduled else None,
        duplicate=duplicate,
    )
