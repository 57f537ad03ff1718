"""Resident Spark workers (`tms worker`): register, claim attempts (long poll), leave, list.

A claim hands the worker each attempt's job token, and the job API then gives the job its
table's storage options: registering and claiming need an admin token.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Path, Request, Response

from tms.api.deps import ManagerDep, SessionDep, SettingsDep, require
from tms.api.errors import ApiError, error_responses
from tms.api.schemas.workers import ClaimedAttempt, ClaimIn, ClaimOut, WorkerIn, WorkerOut
from tms.config import Role, Settings
from tms.store import NotFound, Worker, list_workers, register_worker, remove_worker

router = APIRouter(
    prefix="/v1/workers", tags=["workers"], responses=error_responses(401, 403, 422, 503)
)

POLL_STEP_SECONDS = 0.5
"""How often a waiting claim looks for due work again."""
_404 = error_responses(404, _404="no worker with this id: register it again")
WorkerIdPath = Path(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:@-]+$")


def _out(worker: Worker, settings: Settings, now: float | None = None) -> WorkerOut:
    seen = worker.last_seen_at.timestamp()
    alive = (now if now is not None else time.time()) - seen <= settings.worker_timeout_seconds
    return WorkerOut(
        id=worker.id,
        host=worker.host,
        pid=worker.pid,
        spark_master=worker.spark_master,
        queues=list(worker.queues),
        slots=worker.slots,
        busy=worker.busy,
        attempts_run=worker.attempts_run,
        started_at=worker.started_at,
        last_seen_at=worker.last_seen_at,
        alive=alive,
    )


@router.post(
    "",
    response_model=WorkerOut,
    status_code=201,
    dependencies=[require(Role.ADMIN)],
    responses=error_responses(400, 413),
)
def register_worker_route(body: WorkerIn, session: SessionDep, settings: SettingsDep) -> WorkerOut:
    """Register a worker, or refresh what it offers (same id)."""
    worker = register_worker(
        session,
        body.id,
        host=body.host,
        pid=body.pid,
        spark_master=body.spark_master,
        queues=body.queues,
        slots=body.slots,
    )
    session.commit()
    return _out(worker, settings)


@router.get("", response_model=list[WorkerOut], dependencies=[require(Role.VIEWER)])
def list_workers_route(session: SessionDep, settings: SettingsDep) -> list[WorkerOut]:
    """Every registered worker, oldest first, with whether it is alive."""
    now = time.time()
    return [_out(w, settings, now) for w in list_workers(session)]


@router.post(
    "/{worker_id}/claim",
    response_model=ClaimOut,
    dependencies=[require(Role.ADMIN)],
    responses={**_404, **error_responses(400, 413)},
)
def claim_route(
    body: ClaimIn,
    session: SessionDep,
    settings: SettingsDep,
    manager: ManagerDep,
    request: Request,
    worker_id: str = WorkerIdPath,
) -> ClaimOut:
    """Claim up to `free` due attempts the worker can run, waiting up to `wait_seconds`
    for some (a long poll: an empty answer means ask again; it ends early when the service
    shuts down). Each call tells the service the worker is alive and how busy it is. Expired
    leases are reaped first, as every scheduler tick does: where workers run all the attempts,
    an instance may have no scheduler, and a worker killed outright must still lose them."""
    deadline = time.monotonic() + min(body.wait_seconds, settings.worker_poll_seconds)
    manager.reap(session)
    while True:
        try:
            claimed = manager.claim_for_worker(
                session, worker_id, free=body.free, busy=body.busy, log_dir=body.log_dir
            )
        except NotFound:
            raise ApiError.not_found(f"no worker {worker_id}: register it again") from None
        done = claimed or body.free == 0 or time.monotonic() >= deadline
        if done or _shutting_down(request):
            return ClaimOut(
                attempts=[
                    ClaimedAttempt(
                        attempt_id=job.attempt_id,
                        operation_id=job.operation_id,
                        action=job.action,
                        token=job.token,
                    )
                    for job in claimed
                ]
            )
        time.sleep(POLL_STEP_SECONDS)


def _shutting_down(request: Request) -> bool:
    server = getattr(request.app.state, "server", None)
    return bool(getattr(server, "should_exit", False))


@router.delete("/{worker_id}", status_code=204, dependencies=[require(Role.ADMIN)], responses=_404)
def remove_worker_route(session: SessionDep, worker_id: str = WorkerIdPath) -> Response:
    """A worker that stops leaves: operations left to choose go to spark-submit at once
    (its running attempts keep their leases and finish, or are reaped)."""
    if not remove_worker(session, worker_id):
        raise ApiError.not_found(f"no worker {worker_id}")
    session.commit()
    return Response(status_code=204)
