"""Hudi's HTTP commit callback, `POST /v1/hoodie/service/commit`: store, count, ack.

The busiest endpoint (every commit of every table) is a plain ASGI endpoint that the
application dispatches to before FastAPI's middleware, routing and dependency solving
(`tms.api.app`, which authenticates the caller and renders refusals in the API's one error
format), and its database work goes through group commit: concurrent notifications share
one transaction. `tms.api.gate` authenticates the key and bounds the body
(`TMS_MAX_CALLBACK_BYTES`) before it is read; a key scoped to base-path prefixes is checked
here, once the body names the table (a local base path with its symlinks followed, on a
storage thread: the scope judges the folder the path reaches, which is the one stored).
Hudi does not retry a failed callback, so the 200 is sent only after the commit row, the
counters and any operations the policies created are committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker
from starlette.requests import Request
from starlette.responses import Response

from tms import observe
from tms.application import AutoRegistrationOff, OperationManager
from tms.blocking_calls import BlockingCalls
from tms.config import Settings
from tms.http.errors import ApiError
from tms.http.storage_calls import call_storage_async
from tms.ingest.callback_body import decode_body, parse_callback
from tms.ingest.commit_action import action_from_payload, action_from_stats
from tms.ingest.commit_batch import Notification, Outcome
from tms.ingest.group_commit import GroupCommit
from tms.ingest.probe import StorageInfo, StorageUnavailable, TableProbe
from tms.ingest.registration import checked_base_path, is_local
from tms.ingest.schema import CallbackIn, CallbackOut
from tms.store import find_table_by_base_path

__all__ = ["CALLBACK_PATH", "Authorize", "Grant", "handle_callback", "openapi_path"]

CALLBACK_PATH = "/v1/hoodie/service/commit"
BASE_PATH_FIELD = "body.basePath"


class Grant(Protocol):
    """What the caller's credentials may notify (`tms.api.auth.CallbackGrant`)."""

    def check(self, base_path: str, field: str, *, named: str | None = None) -> None:
        """Refuse (403 naming `field`, and the path as `named`) a base path the credentials
        may not notify; a local one comes with its symlinks followed."""


Authorize = Callable[[Settings, Mapping[str, str]], Grant]
"""Authenticates a callback's headers (`tms.api.auth.authorize_callback`); raises a 401."""


async def handle_callback(request: Request, authorize: Authorize) -> Response:
    """Store the notification in `request` (reads the settings, the session factory, the
    `BlockingCalls` and the `GroupCommit` from the state of its app) and answer it. Refusals
    are raised (`ApiError`, `RequestValidationError`) for the API to render."""
    if request.method != "POST":
        raise ApiError(405, "method_not_allowed", "use POST", headers={"Allow": "POST"})
    state = request.app.state
    settings: Settings = state.settings
    grant = authorize(settings, request.headers)  # as the gate did, for the scope
    chunks = [chunk async for chunk in request.stream()]
    text = decode_body(chunks)  # off the event loop below: a large commit takes seconds
    parsed = await asyncio.to_thread(parse_callback, text, settings.small_file_bytes)
    del text
    body, summary = parsed.body, parsed.summary
    calls: BlockingCalls = state.storage_calls
    base_path = checked_base_path(settings, body.base_path, BASE_PATH_FIELD)
    if is_local(base_path):  # symlinks are followed: the file system may hang
        base_path = await call_storage_async(calls, partial(_located, settings, grant, base_path))
    else:
        grant.check(base_path, BASE_PATH_FIELD)
    action, source = action_from_payload(body.commit_action_type), "payload"
    if action is None:
        action, source = action_from_stats(summary), "write_stats"
    probe = TableProbe(base_path)
    if action is None:  # storage may be slow or hung: bounded, off the event loop
        options = await asyncio.to_thread(_storage_options, state.session_factory, base_path)
        probe = TableProbe(base_path, options)
        try:
            action = await call_storage_async(calls, partial(probe.action_of, body.commit_time))
        except StorageUnavailable:
            raise ApiError(
                503,
                "storage_unavailable",
                "the table's storage failed while reading the commit's action; retry later",
            ) from None
        source = "timeline"
    note = Notification(base_path, body.commit_time, action, source, summary)
    commits: GroupCommit[Notification, Outcome] = state.commits
    outcome = await commits.submit(note)
    registered = False
    if outcome.table_id is None:
        manager: OperationManager = state.manager
        try:
            manager.check_auto_register(base_path)
        except AutoRegistrationOff as exc:
            raise ApiError.not_found(str(exc)) from None
        info = (await call_storage_async(calls, probe.look)).info
        registered = await asyncio.to_thread(
            _register, state.session_factory, manager, body, base_path, info
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


def _located(settings: Settings, grant: Grant, base_path: str) -> str:
    """A local base path with its symlinks followed, if the settings and the caller's key
    allow the folder it leads to (on a storage thread: this reads the file system)."""
    located = checked_base_path(settings, base_path, BASE_PATH_FIELD, follow_links=True)
    grant.check(located, BASE_PATH_FIELD, named=base_path)
    return located


def _storage_options(factory: sessionmaker[Session], base_path: str) -> dict[str, Any] | None:
    """The storage options an admin set on the table registered at `base_path`, to read its
    timeline with (none for a table not registered yet)."""
    with factory() as session:
        table = find_table_by_base_path(session, base_path)
        return dict(table.storage_options) if table is not None and table.storage_options else None


def _register(
    factory: sessionmaker[Session],
    manager: OperationManager,
    body: CallbackIn,
    base_path: str,
    info: StorageInfo | None,
) -> bool:
    """Auto-registration of the callback's table, in its own transaction; True if created.
    Storage this service cannot read does not refuse a writer's table."""
    with factory() as session, session.begin():
        return manager.register_for_writer(
            session, base_path=base_path, info=info, table_name=body.table_name
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
