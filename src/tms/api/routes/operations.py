"""Operator resource: operations (list, show, cancel, retry) and their attempts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from pydantic import WithJsonSchema

from tms.api.deps import ManagerDep, SessionDep, TableAccessDep, require
from tms.api.errors import ApiError, error_responses
from tms.api.responses import operation_out, operations_out
from tms.api.routes.tables import Cursor, parse_cursor
from tms.api.schemas import AttemptOut, EventOut, OperationDetail, OperationOut, OperationPage
from tms.api.schemas.alerts import AlertBrief
from tms.api.schemas.common import MAX_ID, Label, Text, parse_action
from tms.application import NotRetryable
from tms.config import Role
from tms.store import (
    OperationStatus,
    ServiceAction,
    alerts_of_operation,
    get_operation,
    list_attempts,
    list_events,
    list_operations,
)

router = APIRouter(
    prefix="/v1/operations", tags=["operations"], responses=error_responses(401, 403, 422, 503)
)

OperationId = Annotated[int, Path(ge=1, le=MAX_ID, description="the operation's id")]
_404 = error_responses(404, _404="no operation with this id")
_409 = error_responses(409, _409="the operation's status does not allow it")
StatusName = Annotated[
    Text,
    WithJsonSchema({"type": "string", "enum": [s.value for s in OperationStatus]}),
]
"""A status, case-insensitive; `A,B` lists several (the schema shows the single names)."""
ActionName = Annotated[
    Text,
    WithJsonSchema({"type": "string", "enum": [a.value for a in ServiceAction]}),
]
"""An action, case-insensitive; RFC-43's words (compact, cluster) are accepted too."""


def _statuses(values: list[str] | None) -> list[OperationStatus] | None:
    """`status=A&status=B` or `status=A,B`, case-insensitive."""
    if not values:
        return None
    parts = [p.strip().upper() for v in values for p in v.split(",") if p.strip()]
    try:
        return list(dict.fromkeys(OperationStatus(p) for p in parts)) or None
    except ValueError:
        names = ", ".join(s.value for s in OperationStatus)
        raise ApiError.invalid("query.status", f"expected one or more of {names}") from None


def _action(value: str | None) -> ServiceAction | None:
    if value is None or not value.strip():
        return None
    try:
        return parse_action(value)
    except ValueError as exc:
        raise ApiError.invalid("query.action", str(exc)) from None


@router.get("", response_model=OperationPage, dependencies=[require(Role.VIEWER)])
def list_operations_route(
    session: SessionDep,
    table_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    status: Annotated[list[StatusName] | None, Query(description="one or more")] = None,
    action: Annotated[ActionName | None, Query()] = None,
    queue: Annotated[Label | None, Query()] = None,
    include_deleted: bool = False,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Cursor = None,
) -> OperationPage:
    """Newest first (by id, a stable order); `next_cursor` is null on the last page."""
    rows = list_operations(
        session,
        tbl_id=table_id,
        status=_statuses(status),
        action=_action(action),
        include_deleted=include_deleted,
        limit=limit,
        before_id=parse_cursor(cursor),
        queue=queue,
    )
    next_cursor = str(rows[-1].id) if len(rows) == limit else None
    return OperationPage(items=operations_out(session, rows), next_cursor=next_cursor)


@router.get(
    "/{operation_id}",
    response_model=OperationDetail,
    dependencies=[require(Role.VIEWER)],
    responses=_404,
)
def get_operation_route(operation_id: OperationId, session: SessionDep) -> OperationDetail:
    """The operation with its history of status changes and its alerts, oldest first."""
    operation = get_operation(session, operation_id)
    events = [EventOut.of(e) for e in list_events(session, operation_id)]
    alerts = [AlertBrief.of(a) for a in alerts_of_operation(session, operation_id)]
    return OperationDetail(
        **operation_out(session, operation).model_dump(), events=events, alerts=alerts
    )


@router.post(
    "/{operation_id}/cancel",
    response_model=OperationOut,
    dependencies=[require(Role.WRITER)],
    responses={**_404, **_409},
)
def cancel_operation_route(
    operation_id: OperationId, session: SessionDep, manager: ManagerDep, table: TableAccessDep
) -> OperationOut:
    """Scheduled → CANCELLED at once; running → `cancel_requested` (its job stops at its
    next heartbeat). Cancelling a cancelled operation is a no-op; a finished one is 409.

    A scheduled operation whose plan is on the table and cancellable (RFC-79) also gets a
    cancel request written there, so writers see it (a running one's job writes it); the
    scheduler then aborts the plan of every cancelled operation, whenever its job stopped.
    Cancelled in tms either way: what the table refused or storage failed to do is logged,
    not answered."""
    reason = "cancelled by operator"
    (cancelled,) = manager.cancel(session, [operation_id], reason=reason, table=table)
    return operation_out(session, cancelled.operation)


@router.post(
    "/{operation_id}/retry",
    response_model=OperationOut,
    dependencies=[require(Role.WRITER)],
    responses={**_404, **_409},
)
def retry_operation_route(
    operation_id: OperationId, session: SessionDep, manager: ManagerDep
) -> OperationOut:
    """FAILED → SCHEDULED, due now, with a fresh retry budget. CANCELLED is terminal: its
    retry is a new operation (returned) that plans anew, so a cancelled (aborted) plan is
    never run again; retrying the same cancelled operation again returns that one while it
    waits to plan."""
    try:
        operation = manager.retry(session, operation_id, reason="retried by operator")
    except NotRetryable as exc:
        raise ApiError.conflict("transition_refused", str(exc)) from None
    return operation_out(session, operation)


@router.get(
    "/{operation_id}/attempts",
    response_model=list[AttemptOut],
    dependencies=[require(Role.VIEWER)],
    responses=_404,
)
def list_attempts_route(operation_id: OperationId, session: SessionDep) -> list[AttemptOut]:
    """Every launch in order, with outcome, exit code, error and log file."""
    get_operation(session, operation_id)
    return [AttemptOut.of(a) for a in list_attempts(session, operation_id)]
