"""The job side: what a launched job calls, authenticated by its attempt's token.

Contract (shared with the scheduler and `tms.jobs`): 401 when the token is not the one
issued to the attempt in the path; 409 when that attempt no longer holds the operation's
lease (it was reaped, or the operation finished) and the job must stop. A result is
idempotent: sending the same outcome again answers 200 with `duplicate: true`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from tms.api.deps import JobAttemptDep, ManagerDep, SessionDep, SettingsDep
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
from tms.application import JobReport, LeaseLost, Reported
from tms.application.attempt_end import Completed, Failed, PlanInvalid, StoppedOnCancel
from tms.executor_choice import parse_executor
from tms.hudi.locks import advisory_key
from tms.policies.triggers import table_wide_params
from tms.store import OperationStatus, TableLocks, Tbl

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


def _lease_lost(refused: LeaseLost) -> ApiError:
    return ApiError.conflict("lease_lost", str(refused))


@router.get("/spec", response_model=SpecOut)
def spec(
    attempt: JobAttemptDep, session: SessionDep, settings: SettingsDep, manager: ManagerDep
) -> SpecOut:
    """What to run: the operation, its table and its Spark settings."""
    try:
        operation = manager.require_lease(session, attempt)
    except LeaseLost as refused:
        raise _lease_lost(refused) from None
    table = session.get_one(Tbl, operation.tbl_id)
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
    manager: ManagerDep,
    body: HeartbeatIn | None = None,
) -> HeartbeatOut:
    """Extend the lease by `lease_seconds`; `cancel_requested` tells the job to stop and
    roll back. A `progress` is kept on the attempt (`progress` of its JSON) while it runs."""
    progress = body.progress.model_dump() if body is not None and body.progress else None
    try:
        operation = manager.heartbeat(session, attempt, progress)
    except LeaseLost as refused:
        raise _lease_lost(refused) from None
    assert operation.lease_expires_at is not None  # a held lease has an expiry
    return HeartbeatOut(
        lease_expires_at=operation.lease_expires_at, cancel_requested=operation.cancel_requested
    )


@router.post("/instant", response_model=InstantOut, responses=_BODY)
def report_instant(
    attempt: JobAttemptDep, body: InstantIn, session: SessionDep, manager: ManagerDep
) -> InstantOut:
    """The job scheduled the plan itself at this instant (operations submitted without one)."""
    try:
        operation = manager.plan_scheduled(session, attempt, body.instant)
    except LeaseLost as refused:
        raise _lease_lost(refused) from None
    assert operation.instant is not None
    return InstantOut(operation_id=operation.id, instant=operation.instant)


@router.post("/table-lock", response_model=TableLockOut)
def take_table_lock(
    attempt: JobAttemptDep, session: SessionDep, manager: ManagerDep, request: Request
) -> TableLockOut:
    """Take the attempt's table's PostgreSQL advisory lock (`postgres` lock provider) for
    the job, without waiting: `held: false` while another holder has it. The service holds
    it until the job releases it, reports its result, or loses its lease."""
    try:
        operation = manager.require_lease(session, attempt)
    except LeaseLost as refused:
        raise _lease_lost(refused) from None
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
    manager: ManagerDep,
    request: Request,
) -> ResultOut:
    """Finish the attempt. SUCCEEDED completes the operation; FAILED retries it after a
    backoff when `retryable`, the operation retries on error and has retries left, else
    fails it; CANCELLED cancels it; INVALID (the plan vanished) invalidates it."""
    error = _scrub(body.error[:MAX_ERROR_CHARS]) if body.error else None
    figures = _scrub(body.figures)
    report = JobReport(
        _attempt_end(body, error, figures),
        figures,
        spark_app_id=_scrub(body.spark_app_id) if body.spark_app_id else None,
    )
    try:
        reported = manager.report(session, attempt, report)
    except LeaseLost as refused:
        raise _lease_lost(refused) from None
    if not reported.duplicate:
        request.app.state.table_locks.release_for(attempt.id)  # a job that forgot to
    return _result_out(reported)


def _attempt_end(
    body: ResultIn, error: str | None, figures: dict[str, Any]
) -> Completed | Failed | StoppedOnCancel | PlanInvalid:
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
        return StoppedOnCancel(error=error)
    return PlanInvalid(reason=error or "the plan vanished from the timeline")


def _result_out(reported: Reported) -> ResultOut:
    operation = reported.operation
    scheduled = operation.status is OperationStatus.SCHEDULED
    return ResultOut(
        operation_id=operation.id,
        attempt_id=reported.attempt.id,
        operation_status=operation.status,
        attempt_outcome=reported.outcome,
        next_run_at=operation.next_run_at if scheduled else None,
        duplicate=reported.duplicate,
    )
