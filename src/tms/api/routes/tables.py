"""Operator resource: registered tables (list, register, show, change, delete, timeline)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response
from pydantic import Field, StringConstraints
from sqlalchemy.orm import Session

from tms.api.deps import ManagerDep, SessionDep, SettingsDep, StorageCallsDep, require
from tms.api.errors import ApiError, error_responses
from tms.api.responses import table_out
from tms.api.schemas import TableIn, TableOut, TablePage, TablePatch, TimelineInstant, TimelineOut
from tms.api.schemas.common import MAX_ID, Identifier, Text
from tms.api.schemas.tables import TableFields
from tms.api.table_reads import read_registered_table
from tms.application import OperationManager, TableRegistration
from tms.blocking_calls import BlockingCalls
from tms.config import Role
from tms.http.storage_calls import call_storage
from tms.hudi.storage.options import StorageOptionError, check_storage_options
from tms.hudi.table import HudiTable
from tms.ingest.probe import TableProbe
from tms.ingest.registration import located_base_path, require_table
from tms.store import delete_table, get_table, list_tables, update_table

PendingQuery = Annotated[
    bool,
    Query(
        description="true: register a table that will be created (storage need not show "
        "a Hudi table at the base path yet)"
    ),
]


OPTIONS_FIELD = "body.storage_options"


def checked_storage_options(base_path: str, options: dict[str, Any]) -> dict[str, Any]:
    """`options`, if a table at `base_path` can carry them to its jobs' Spark tasks; else 422
    naming the option (never its value)."""
    try:
        check_storage_options(base_path, options)
    except StorageOptionError as exc:
        raise ApiError.invalid(OPTIONS_FIELD, f"{exc.option}: {exc}") from None
    return options


def register_body(
    session: Session,
    body: TableFields,
    response: Response,
    manager: OperationManager,
    calls: BlockingCalls,
    *,
    pending: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> TableOut:
    """`POST /v1/tables` and RFC-43 register, which answer alike: storage is read (with
    `storage_options`) before the transaction; 201 when created, 200 when this name and base
    path were registered already. Unless `pending`, storage must show a Hudi table at the
    base path."""
    field, settings = "body.base_path", manager.settings
    base_path = located_base_path(settings, calls, body.base_path, field)
    if storage_options:
        checked_storage_options(base_path, storage_options)
    seen = call_storage(calls, TableProbe(base_path, storage_options).look)
    if not pending:
        require_table(seen, field)
    registration = TableRegistration(
        db_name=body.db_name,
        table_name=body.table_name,
        base_path=base_path,
        info=seen.info,
        owner=body.owner,
        queue=body.queue,
        priority=body.priority,
        table_type=body.table_type,
        enabled_actions=list(dict.fromkeys(body.enabled_actions))
        if body.enabled_actions is not None
        else None,
        policy=body.policy.model_dump(exclude_none=True) if body.policy else None,
        paused=body.paused,
        storage_options=storage_options or None,
    )
    registered = manager.register(session, registration)
    session.commit()
    response.status_code = 201 if registered.created else 200
    return table_out(registered.table, settings, created=registered.created)


router = APIRouter(
    prefix="/v1/tables", tags=["tables"], responses=error_responses(401, 403, 422, 503)
)
log = logging.getLogger(__name__)

TableId = Annotated[int, Path(ge=1, le=MAX_ID, description="the table's id")]
CURSOR_PATTERN = r"^([1-9][0-9]{0,17})?$"
Cursor = Annotated[
    Annotated[
        str,
        StringConstraints(max_length=20, pattern=r"^[0-9]{0,19}$"),
        Field(json_schema_extra={"pattern": CURSOR_PATTERN}),
        Text,
    ]
    | None,
    Query(description="a page's `next_cursor`"),
]
"""Listing cursors: the last id of the previous page (ASCII digits, checked to be an id; the
document shows the ids an API returns: 1 to 18 digits, no leading zero)."""
_404 = error_responses(404, _404="no table with this id")
_BODY = error_responses(400, 413)
_STORAGE = error_responses(502, 504)


def parse_cursor(cursor: str | None) -> int | None:
    """Cursors are the last id of the previous page, opaque to clients."""
    if cursor is None or cursor == "":
        return None
    if not (cursor.isascii() and cursor.isdigit()) or not 0 < int(cursor) <= MAX_ID:
        raise ApiError.invalid("query.cursor", "not a cursor this API returned")
    return int(cursor)


@router.get("", response_model=TablePage, dependencies=[require(Role.VIEWER)])
def list_tables_route(
    session: SessionDep,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Cursor = None,
    db_name: Annotated[Identifier | None, Query()] = None,
    paused: bool | None = None,
) -> TablePage:
    """Tables in id order; `next_cursor` is null on the last page."""
    rows = list_tables(
        session, limit=limit, after_id=parse_cursor(cursor), db_name=db_name, paused=paused
    )
    next_cursor = str(rows[-1].id) if len(rows) == limit else None
    return TablePage(items=[table_out(t, settings) for t in rows], next_cursor=next_cursor)


@router.post(
    "",
    response_model=TableOut,
    status_code=201,
    dependencies=[require(Role.WRITER)],
    responses={
        200: {"description": "already registered"},
        **error_responses(409, _409="the name or base path is registered to another table"),
        **_BODY,
        **_STORAGE,
    },
)
def create_table_route(
    body: TableIn,
    response: Response,
    session: SessionDep,
    manager: ManagerDep,
    calls: StorageCallsDep,
    role: Annotated[Role, require(Role.WRITER)],
    pending: PendingQuery = False,
) -> TableOut:
    """Register a table: 201 when created, 200 when it existed with this name and path (its
    storage options are then left as they are: change them with PATCH). Storage options
    need the admin role."""
    if body.storage_options and role is not Role.ADMIN:
        raise ApiError(
            403, "forbidden", f"{OPTIONS_FIELD}: only the admin role sets storage options"
        )
    return register_body(
        session,
        body,
        response,
        manager,
        calls,
        pending=pending,
        storage_options=body.storage_options,
    )


@router.get(
    "/{table_id}", response_model=TableOut, dependencies=[require(Role.VIEWER)], responses=_404
)
def get_table_route(table_id: TableId, session: SessionDep, settings: SettingsDep) -> TableOut:
    return table_out(get_table(session, table_id), settings)


@router.patch(
    "/{table_id}",
    response_model=TableOut,
    dependencies=[require(Role.ADMIN)],
    responses={**_404, **_BODY},
)
def patch_table_route(
    table_id: TableId, body: TablePatch, session: SessionDep, settings: SettingsDep
) -> TableOut:
    """Pause or resume, change queue, priority, owner, enabled actions, the policy overrides
    (`policy` replaces them all; `{}` goes back to the service defaults) or the storage
    options (`storage_options` replaces them all; `{}` removes them)."""
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    for key in [k for k, v in changes.items() if v is None]:
        raise ApiError.invalid(f"body.{key}", "must not be null (leave it out instead)")
    if body.storage_options is not None:
        base_path = get_table(session, table_id).base_path
        changes["storage_options"] = checked_storage_options(base_path, body.storage_options)
    if body.policy is not None:
        changes["policy"] = body.policy.model_dump(exclude_none=True)
    if body.enabled_actions is not None:
        changes["enabled_actions"] = list(dict.fromkeys(body.enabled_actions))
    table = update_table(session, table_id, **changes) if changes else get_table(session, table_id)
    session.commit()
    return table_out(table, settings)


@router.delete(
    "/{table_id}",
    status_code=204,
    dependencies=[require(Role.ADMIN)],
    responses={**_404, **error_responses(409, _409="an operation of the table is running")},
)
def delete_table_route(table_id: TableId, session: SessionDep) -> Response:
    """Forget the table and its commits, operations and attempts (storage is untouched)."""
    delete_table(session, table_id)
    session.commit()
    return Response(status_code=204)


@router.get(
    "/{table_id}/timeline",
    response_model=TimelineOut,
    dependencies=[require(Role.VIEWER)],
    responses={
        **_404,
        **error_responses(409, _409="a table version or feature tms does not read"),
        **_STORAGE,
    },
)
def timeline_route(table_id: TableId, session: SessionDep, calls: StorageCallsDep) -> TimelineOut:
    """The table's timeline as storage shows it now (read with `tms.hudi`, with the table's
    storage options; its requests count in `tms_storage_requests_total`)."""
    table, rows = read_registered_table(session, calls, table_id, "timeline", _described_timeline)
    return TimelineOut(
        table_id=table_id,
        base_path=table.base_path,
        table_type=table.config.table_type,
        table_version=table.config.table_version,
        instants=[TimelineInstant(**row) for row in rows],
    )


def _described_timeline(table: HudiTable) -> tuple[HudiTable, list[dict[str, Any]]]:
    return table, table.timeline().describe()
