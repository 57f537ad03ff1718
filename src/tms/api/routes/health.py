"""Probes and metrics; no auth, so orchestrators and Prometheus need no token."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from tms import metrics
from tms.store.db import current_revision, head_revision
from tms.store.models import Action, OperationStatus
from tms.store.operations import count_operations, queue_depth

router = APIRouter(tags=["health"])
log = logging.getLogger(__name__)


def _factory(request: Request) -> sessionmaker[Session]:
    factory: sessionmaker[Session] = request.app.state.session_factory
    return factory


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is alive and serving (says nothing about the database)."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "not ready, with the reason"}})
def readyz(request: Request) -> JSONResponse:
    """Ready when the database answers and its schema is at the code's migration head."""
    engine = _factory(request).kw.get("bind")
    if not isinstance(engine, Engine):
        return _not_ready("no database engine configured")
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        current = current_revision(engine)
    except Exception as exc:
        return _not_ready(f"database unreachable: {type(exc).__name__}: {exc}".splitlines()[0])
    try:
        head = head_revision()
    except Exception as exc:
        return _not_ready(f"migrations unreadable: {exc}")
    if current != head:
        return _not_ready(f"database at migration {current}, code expects {head}")
    return JSONResponse({"status": "ready", "revision": current})


def _not_ready(reason: str) -> JSONResponse:
    body: dict[str, Any] = {
        "status": "not_ready",
        "reason": reason,
        "error": {"code": "not_ready", "message": reason, "field": None},
    }
    return JSONResponse(body, status_code=503)


def _refresh_gauges(factory: sessionmaker[Session]) -> None:
    """Operations by status and action, and due operations per queue: two grouped counts
    served by the status indexes. Zeros are written too, so a drained status reads 0."""
    with factory() as session:
        counts = count_operations(session)
        depth = queue_depth(session)
    for action in Action:
        for status in OperationStatus:
            value = counts.get((action, status), 0)
            metrics.OPERATIONS_BY_STATUS.labels(status.value, action.value).set(value)
    metrics.QUEUE_DEPTH.clear()
    for queue, value in depth.items():
        metrics.QUEUE_DEPTH.labels(queue).set(value)


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics_route(request: Request) -> Response:
    """Prometheus text format. Gauges of operations are read from the database (shared by
    all instances); if it does not answer, the last values are served and the rest stays."""
    try:
        _refresh_gauges(_factory(request))
    except Exception as exc:
        log.warning("metrics: cannot refresh operation gauges: %s", exc)
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
