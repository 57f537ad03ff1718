"""Hudi's HTTP commit callback, `POST /v1/hoodie/service/commit`: store, count, ack.

The busiest endpoint (every commit of every table) is a plain ASGI endpoint that the
application dispatches to before FastAPI's middleware, routing and dependency solving (see
`tms.api.app`), and its database work goes through group commit: concurrent notifications
share one transaction. `tms.api.gate` authenticates the key and bounds the body
(`TMS_MAX_CALLBACK_BYTES`) before it is read; a key scoped to base-path prefixes is checked
here, once the body names the table. Hudi does not retry a failed callback, so the 200 is
sent only after the commit row, the counters and any operations the policies created are
committed. Errors have the API's one format (`tms.api.errors`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tms import observe
from tms.api.auth import authorize_callback
from tms.api.commit_action import action_from_payload, action_from_stats, summarize
from tms.api.commit_batch import Notification, Outcome
from tms.api.errors import ApiError, error_response
from tms.api.group_commit import GroupCommit
from tms.api.probe import StorageInfo, TableProbe
from tms.api.registration import DEFAULT_DB_NAME, checked_base_path, register
from tms.api.schemas import CallbackIn, CallbackOut
from tms.api.storage_calls import StorageCalls
from tms.config import Settings

__all__ = ["CALLBACK_PATH", "CALLBACK_ROUTE", "commit_callback", "openapi_path"]

CALLBACK_PATH = "/v1/hoodie/service/commit"


@dataclass(frozen=True)
class _Route:
    """What `HttpMetricsMiddleware` reads for its route label (FastAPI puts its route
    there)."""

    path: str = CALLBACK_PATH


CALLBACK_ROUTE = _Route()
"""`scope["route"]` of the callback, set before the gate so refusals are labelled too."""


async def commit_callback(scope: Scope, receive: Receive, send: Send) -> None:
    """The endpoint; reads the settings, the session factory and the `GroupCommit` from
    the state of `scope["app"]`."""
    scope["route"] = CALLBACK_ROUTE
    request = Request(scope, receive)
    try:
        response = await _respond(request)
    except ClientDisconnect:
        return
    except Exception as exc:
        response = await error_response(request, exc)
    await response(scope, receive, send)


async def _respond(request: Request) -> Response:
    if request.method != "POST":
        raise ApiError(405, "method_not_allowed", "use POST", headers={"Allow": "POST"})
    state = request.app.state
    settings: Settings = state.settings
    grant = authorize_callback(settings, request.headers)  # as the gate did, for the scope
    body = _parse(await request.body())
    base_path = checked_base_path(settings, body.base_path, "body.basePath")
    grant.check(base_path, field="body.basePath")
    summary = summarize(body.write_stats or [])
    action, source = action_from_payload(body.commit_action_type), "payload"
    if action is None:
        action, source = action_from_stats(summary), "write_stats"
    probe = TableProbe(base_path)
    calls: StorageCalls = state.storage_calls
    if action is None:  # storage may be slow or hung: bounded, off the event loop
        action = await calls.run_async(partial(probe.action_of, body.commit_time))
        source = "timeline"
    note = Notification(base_path, body.commit_time, action, source, summary)
    commits: GroupCommit[Notification, Outcome] = state.commits
    outcome = await commits.submit(note)
    registered = False
    if outcome.table_id is None:
        if not settings.auto_register:
            raise ApiError.not_found(
                f"no table is registered at {base_path} and auto-registration is off"
            )
        info = (await calls.run_async(probe.look)).info
        registered = await asyncio.to_thread(
            _register, state.session_factory, body, base_path, info
        )
        outcome = await commits.submit(note)
        if outcome.table_id is None:
            raise ApiError.not_found(f"the table at {base_path} was removed meanwhile")
    observe.commit_notified("callback", new=outcome.new)
    observe.operations_created(outcome.operations, "policy")
    out = CallbackOut(
        table_id=outcome.table_id,
        commit_time=body.commit_time,
        action=outcome.action or "",
        action_source=outcome.action_source,
        new=outcome.new,
        table_registered=registered,
        operations_created=[op.id for op in outcome.operations],
    )
    return Response(out.model_dump_json(), media_type="application/json")


def _parse(body: bytes) -> CallbackIn:
    """Validated as a FastAPI body parameter would be: errors name `body.<field>`."""
    try:
        return CallbackIn.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in errors]
        ) from None


def _register(
    factory: sessionmaker[Session], body: CallbackIn, base_path: str, info: StorageInfo | None
) -> bool:
    """Auto-registration of the callback's table, in its own transaction; True if created.
    Storage this service cannot read does not refuse a writer's table."""
    db_name = info.database_name if info is not None and info.database_name else None
    with factory() as session, session.begin():
        return register(
            session,
            db_name=db_name or DEFAULT_DB_NAME,
            table_name=body.table_name,
            base_path=base_path,
            info=info,
        ).created


def openapi_path() -> tuple[dict[str, Any], dict[str, Any]]:
    """The callback's OpenAPI path item and the component schemas it refers to (FastAPI
    does not see middleware, so the application adds these to its document)."""
    template = "#/components/schemas/{model}"
    schemas: dict[str, Any] = {}
    for model in (CallbackIn, CallbackOut):
        schema = model.model_json_schema(by_alias=True, ref_template=template)
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema

    def ref(name: str) -> dict[str, Any]:
        return {"content": {"application/json": {"schema": {"$ref": template.format(model=name)}}}}

    post = {
        "tags": ["hudi writers"],
        "summary": "Hudi HTTP commit callback",
        "description": (
            "Idempotent per (table, commitTime): a repeated notification stores nothing new "
            "and answers `new: false`. An unknown table is registered when auto-registration "
            "is on. Takes the `HUDI-CALLBACK-KEY` header (or, with auth on, a writer token)."
        ),
        "operationId": "commit_callback",
        "parameters": [
            {
                "name": "HUDI-CALLBACK-KEY",
                "in": "header",
                "required": False,
                "description": "one of TMS_CALLBACK_KEYS",
                "schema": {"type": "string"},
            }
        ],
        "requestBody": {"required": True, **ref("CallbackIn")},
        "responses": {
            "200": {"description": "stored (or already stored)", **ref("CallbackOut")},
            "401": {"description": "missing or wrong HUDI-CALLBACK-KEY"},
            "403": {"description": "the key may not notify this base path (`body.basePath`)"},
            "413": {"description": "the body is over TMS_MAX_CALLBACK_BYTES"},
            "404": {"description": "unknown table and auto-registration off"},
            "422": {"description": "a field of the payload is wrong; `field` names it"},
        },
    }
    return {"post": post}, schemas
