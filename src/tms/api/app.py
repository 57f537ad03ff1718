"""Assembles the FastAPI application and puts the commit callback (`tms.ingest`) in front of
it, with the API's authentication and error format; no other behaviour lives here."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from tms.api.auth import authorize_callback, log_callback_keys
from tms.api.docs import install_docs
from tms.api.errors import (
    MALFORMED_HTTP,
    error_response,
    error_responses,
    install_error_handlers,
)
from tms.api.gate import CALLBACK_GUARD, RequestGate
from tms.api.http_metrics import HttpMetricsMiddleware
from tms.api.listeners import ListenerSplit
from tms.api.routes import (
    alerts,
    archival,
    attempt_logs,
    console,
    health,
    hoodie,
    hoodie_marker,
    hoodie_view,
    jobs,
    measurements,
    operations,
    overview,
    partition_ttl,
    savepoints,
    table_storage,
    tables,
    whoami,
    workers,
)
from tms.application import OperationManager
from tms.blocking_calls import BlockingCalls
from tms.config import Settings
from tms.ingest.callback import CALLBACK_PATH, handle_callback, openapi_path
from tms.ingest.commit_batch import database_unreachable, write_notifications
from tms.ingest.group_commit import GroupCommit
from tms.markers import MarkerServer
from tms.store import TableLocks

__all__ = ["TmsApi", "create_app"]

log = logging.getLogger(__name__)

COMMIT_BATCH_MAX = 256
"""Commit notifications one transaction stores at most (group commit)."""
COMMITS_IN_FLIGHT = 2
"""Batches being written at once, each on its own connection."""

DESCRIPTION = """Table management service for Apache Hudi.

Errors are `{"error": {"code", "message", "field"}}`; bad input is 422 naming the field
(a body that is not JSON at all: `body`).
Bearer tokens (`TMS_AUTH_TOKENS`): viewers read, writers also notify and submit, admins
also change and delete tables. The commit callback takes Hudi's `HUDI-CALLBACK-KEY`.
"""


@dataclass(frozen=True)
class _Route:
    """What `HttpMetricsMiddleware` reads for its route label (FastAPI puts its route
    there)."""

    path: str = CALLBACK_PATH


CALLBACK_ROUTE = _Route()
"""`scope["route"]` of the callback, set before the gate so refusals are labelled too."""


async def commit_callback(scope: Scope, receive: Receive, send: Send) -> None:
    """The commit callback as a plain ASGI endpoint (`tms.ingest.callback`), its refusals
    in the API's error format."""
    scope["route"] = CALLBACK_ROUTE
    request = Request(scope, receive)
    try:
        response = await handle_callback(request, authorize_callback)
    except ClientDisconnect:
        return
    except Exception as exc:
        response = await error_response(request, exc)
    await response(scope, receive, send)


class TmsApi(FastAPI):
    """FastAPI, with Hudi's commit callback dispatched first: the busiest endpoint skips
    the middleware stack, routing and dependency solving (its own HTTP metrics and request
    gate, errors in the API's format)."""

    _callback = HttpMetricsMiddleware(
        RequestGate(commit_callback, CALLBACK_GUARD, methods=frozenset({"POST"}))
    )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == CALLBACK_PATH:
            scope["app"] = self
            scope["route"] = CALLBACK_ROUTE
            await self._callback(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def create_app(
    settings: Settings,
    session_factory: sessionmaker[Session],
    *,
    lifespan: Any = None,
) -> TmsApi:
    """The API over `session_factory`'s database; `lifespan` lets `tms serve` run the
    scheduler alongside (tests pass none)."""
    if not settings.auth_enabled:
        log.warning(
            "TMS_AUTH_TOKENS is not set: API authentication is OFF; anyone who can reach "
            "this port may register tables and submit operations"
        )
    log_callback_keys(settings)
    app = TmsApi(
        title="tms",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.session_factory = session_factory
    app.state.manager = manager = OperationManager(settings)
    app.state.commits = GroupCommit(
        partial(write_notifications, session_factory, manager),
        max_batch=COMMIT_BATCH_MAX,
        max_in_flight=COMMITS_IN_FLIGHT,
        whole_batch_failure=database_unreachable,
    )
    app.state.table_locks = TableLocks(session_factory.kw["bind"])
    app.state.storage_calls = BlockingCalls(
        "tms-storage", threads=settings.storage_threads, timeout=settings.storage_timeout_seconds
    )
    app.state.markers = MarkerServer(
        settings, session_factory, session_factory.kw["bind"], app.state.storage_calls
    )
    install_error_handlers(app)
    app.add_middleware(RequestGate)  # inside the metrics: refusals are counted too
    app.add_middleware(HttpMetricsMiddleware)
    app.add_middleware(ListenerSplit, timeline_server_port=settings.timeline_server_port)
    routers = (
        hoodie,
        tables,
        table_storage,
        savepoints,
        archival,
        partition_ttl,
        measurements,
        operations,
        attempt_logs,
        alerts,
        jobs,
        workers,
    )
    for module in (*routers, overview, whoami, health, console):
        app.include_router(module.router)
    app.include_router(hoodie_marker.router)
    app.include_router(hoodie_view.router)
    install_docs(app)
    app.openapi = partial(_openapi, app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the commit callback, which middleware serves."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        path, schemas = openapi_path()
        _document_callback_errors(path["post"]["responses"])
        schema["paths"][CALLBACK_PATH] = path
        _document_malformed_http(schema["paths"])
        schema.setdefault("components", {}).setdefault("schemas", {}).update(schemas)
        app.openapi_schema = schema
    return app.openapi_schema


def _document_malformed_http(paths: dict[str, Any]) -> None:
    """400 on every operation: the HTTP parser refuses a malformed request for any route,
    before the route (and its own documentation) is reached."""
    ref = {"$ref": "#/components/schemas/ErrorOut"}
    for item in paths.values():
        for method, operation in item.items():
            if method not in _HTTP_METHODS:
                continue
            responses = operation.setdefault("responses", {})
            own = responses.get("400")
            if own is None:
                responses["400"] = {
                    "description": MALFORMED_HTTP,
                    "content": {"application/json": {"schema": ref}},
                }
            elif MALFORMED_HTTP not in own.get("description", ""):
                own["description"] = f"{own.get('description', 'bad request')}; or {MALFORMED_HTTP}"


_HTTP_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})

_CALLBACK_ERRORS = error_responses(
    401,
    403,
    404,
    409,
    413,
    422,
    503,
    _403="a bearer token whose role is below writer",
    _409="auto-registration: the name or base path is registered to another table",
)


def _document_callback_errors(responses: dict[str, Any]) -> None:
    """The callback's error statuses, each with the error schema (its own descriptions
    kept where it has them)."""
    ref = {"$ref": "#/components/schemas/ErrorOut"}
    for status, documented in _CALLBACK_ERRORS.items():
        entry = responses.setdefault(str(status), {"description": documented["description"]})
        entry["content"] = {"application/json": {"schema": ref}}
