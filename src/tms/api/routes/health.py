"""Probes and metrics; no auth, so orchestrators and Prometheus need no token."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from tms import metrics, observe
from tms.engines.hudi_bundle import bundle_fetcher
from tms.store import (
    OperationStatus,
    ServiceAction,
    check_ready,
    count_operations,
    head_revision,
    latest_measurements,
    probe_engine,
    queue_depth,
)

if TYPE_CHECKING:
    from tms.config import Settings
    from tms.embedded_postgres import EmbeddedSupervisor, SupervisorStatus

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)


READY_TIMEOUT_SECONDS = 1.0
"""`/readyz` answers within this, whatever the database does (a stopped server accepts
connections and never answers them)."""


def _factory(request: Request) -> sessionmaker[Session]:
    factory: sessionmaker[Session] = request.app.state.session_factory
    return factory


def _supervisor_status(request: Request) -> SupervisorStatus | None:
    """The embedded database's supervisor, when the service runs one."""
    supervisor: EmbeddedSupervisor | None = getattr(request.app.state, "database_supervisor", None)
    return None if supervisor is None else supervisor.status()


@router.get("/healthz", responses={503: {"description": "unhealthy, with the reason"}})
async def healthz(request: Request) -> JSONResponse:
    """The process is alive and serving; never touches the database (and runs on the event
    loop, so worker threads blocked on it do not delay it). Unhealthy only when the
    embedded database died and cannot be restarted, so the service should be."""
    status = _supervisor_status(request)
    if status is not None and not status.healthy:
        reason = status.reason or "the embedded database is not watched"
        return _failing("unhealthy", reason)
    return JSONResponse({"status": "ok"})


class _ReadinessCheck:
    """At most one readiness check on the database at a time, on a worker thread with its
    own pool-less engine: a check that hangs (connect timeout: libpq's minimum, 2 s) is
    awaited by later probes instead of piling up threads."""

    def __init__(self, engine: Engine) -> None:
        self._engine = probe_engine(engine)
        self._pending: asyncio.Future[str | None] | None = None

    async def reason_not_ready(self, timeout: float) -> str | None:
        if self._pending is None or self._pending.done():
            self._pending = asyncio.ensure_future(asyncio.to_thread(self._check))
        try:
            return await asyncio.wait_for(asyncio.shield(self._pending), timeout)
        except TimeoutError:
            return f"the database did not answer within {timeout:g}s"

    def _check(self) -> str | None:
        try:
            return check_ready(self._engine)
        except DBAPIError as exc:
            log.warning("readiness: database unreachable: %s", exc)
            return "the database is unreachable"
        except Exception as exc:  # e.g. migrations unreadable
            log.warning("readiness check failed: %s", exc)
            return "the readiness check failed; see the server log"


@router.get("/readyz", responses={503: {"description": "not ready, with the reason"}})
async def readyz(request: Request) -> JSONResponse:
    """Ready when the database answers and its schema is at the code's migration head;
    answers within `READY_TIMEOUT_SECONDS` either way."""
    status = _supervisor_status(request)
    if status is not None and not status.ready:
        return _failing("not_ready", status.reason or "the embedded database is not running")
    check: _ReadinessCheck | None = getattr(request.app.state, "readiness_check", None)
    if check is None:
        engine = _factory(request).kw.get("bind")
        if not isinstance(engine, Engine):
            return _failing("not_ready", "no database engine configured")
        check = request.app.state.readiness_check = _ReadinessCheck(engine)
    reason = await check.reason_not_ready(READY_TIMEOUT_SECONDS)
    if reason is not None:
        return _failing("not_ready", reason)
    return JSONResponse(
        {"status": "ready", "revision": head_revision(), "hudi_executor": _hudi(request)}
    )


def _hudi(request: Request) -> dict[str, str | bool]:
    """Whether the `hudi` executor can run from here: its bundle configured or cached, being
    fetched, fetched on first need, or unavailable with the reason and what to do. The
    service is ready either way: tms's own executor serves what it supports."""
    settings: Settings = request.app.state.settings
    status = bundle_fetcher(settings).status(settings.hudi_jars)
    metrics.HUDI_EXECUTOR_AVAILABLE.set(1 if status.available else 0)
    return status.to_dict()


def _failing(status: str, reason: str) -> JSONResponse:
    body: dict[str, Any] = {
        "status": status,
        "reason": reason,
        "error": {"code": status, "message": reason, "field": None},
    }
    return JSONResponse(body, status_code=503)


def _refresh_gauges(factory: sessionmaker[Session]) -> None:
    """Operations by status and action, and due operations per queue: two grouped counts
    served by the status indexes. Zeros are written too, so a drained status reads 0."""
    with factory() as session:
        counts = count_operations(session)
        depth = queue_depth(session)
    for action in ServiceAction:
        for status in OperationStatus:
            value = counts.get((action, status), 0)
            metrics.OPERATIONS_BY_STATUS.labels(status.value, action.value).set(value)
    metrics.QUEUE_DEPTH.clear()
    for queue, value in depth.items():
        metrics.QUEUE_DEPTH.labels(queue).set(value)


MEASUREMENT_REFRESH_SECONDS = 30.0
"""The per-table measurement gauges are read from the database at most this often (a
table is measured every `TMS_MEASURE_INTERVAL_SECONDS`; thousands of rows per scrape would
be waste)."""


def _refresh_measurement_gauges(request: Request) -> None:
    """Each table's latest measurement into its gauges, unless read within the last
    `MEASUREMENT_REFRESH_SECONDS` by this process."""
    state = request.app.state
    now = time.monotonic()
    last: float | None = getattr(state, "measurement_gauges_at", None)
    if last is not None and now - last < MEASUREMENT_REFRESH_SECONDS:
        return
    with _factory(request)() as session:
        latest = latest_measurements(session)
    observe.measurements_seen(latest)
    state.measurement_gauges_at = now


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics_route(request: Request) -> Response:
    """Prometheus text format. Gauges of operations are read from the database (shared by
    all instances); if it does not answer, the last values are served and the rest stays."""
    try:
        _refresh_gauges(_factory(request))
    except Exception as exc:
        log.warning("metrics: cannot refresh operation gauges: %s", exc)
    try:
        _refresh_measurement_gauges(request)
    except Exception as exc:
        log.warning("metrics: cannot refresh table measurement gauges: %s", exc)
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
