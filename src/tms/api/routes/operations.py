"""Operator resource: operations (list, show, cancel, retry) and their attempts."""

from __future__ import annotations

import logging
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import WithJsonSchema

from tms import observe
from tms.api.deps import SessionDep, StorageCallsDep, require
from tms.api.errors import ApiError, error_responses
from tms.api.responses import operation_out, operations_out
from tms.api.routes.tables import Cursor, parse_cursor
from tms.api.schemas import AttemptOut, EventOut, OperationDetail, OperationOut, OperationPage
from tms.api.schemas.alerts import AlertBrief
from tms.api.schemas.common import MAX_ID, Label, Text, parse_action
from tms.config import Role
from tms.hudi.errors import CancelRefusedError, UnsupportedTableError
from tms.hudi.locks import AdvisoryLocks, LockSpec, LockTimeoutError, use_advisory_locks
from tms.hudi.table import HudiTable
from tms.hudi.timeline.cancel import request_cancel
from tms.policies.triggers import table_wide_params
from tms.services.params import BadJobInput, lock_settings
from tms.store import (
    Action,
    OperationStatus,
    alerts_of_operation,
    cancel_operation,
    get_operation,
    get_table,
    list_attempts,
    list_events,
    list_operations,
    resubmit_cancelled,
    retry_operation,
)

log = logging.getLogger(__name__)

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
    WithJsonSchema({"type": "string", "enum": [a.value for a in Action]}),
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


def _action(value: str | None) -> Action | None:
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
    operation_id: OperationId, session: SessionDep, calls: StorageCallsDep, request: Request
) -> OperationOut:
    """Scheduled → CANCELLED at once; running → `cancel_requested` (its job stops at its
    next heartbeat). Cancelling a cancelled operation is a no-op; a finished one is 409.

    A scheduled operation whose plan is on the table and cancellable (RFC-79) also gets a
    cancel request written there, so writers see it and the next clean aborts the plan (a
    running one's job writes it). Cancelled in tms either way: what the table refused or
    storage failed to do is logged, not answered."""
    operation = get_operation(session, operation_id)
    if operation.cancel_settled:
        return operation_out(session, operation)
    operation = cancel_operation(session, operation_id, reason="cancelled by operator")
    session.commit()
    if operation.status is OperationStatus.CANCELLED:
        observe.operation_moved(operation)
        if operation.instant is not None and operation.action in PLANNED_ACTIONS:
            table = get_table(session, operation.tbl_id)
            settings = table_wide_params(table.policy or {}, operation.action)
            write = partial(
                _request_cancel_on_table,
                table.base_path,
                dict(table.storage_options),
                settings,
                operation.instant,
                calls.timeout,
                request.app.state.table_locks,
            )
            try:
                calls.run(write)
            except ApiError as exc:
                log.warning("cancel of %s on the table: %s", operation.instant, exc.message)
    return operation_out(session, operation)


PLANNED_ACTIONS = (Action.COMPACTION, Action.CLUSTERING)
"""Actions whose plans may be cancellable."""


def _request_cancel_on_table(
    base_path: str,
    options: dict[str, Any],
    params: dict[str, Any],
    instant: str,
    wait_seconds: float,
    locks: AdvisoryLocks,
) -> None:
    """RFC-79 `request_cancel` on a storage thread, under the table lock its writers use
    (`params`: the table's lock settings in Hudi's keys; `locks` takes a `postgres` one),
    waiting less than the storage timeout. Refusals (a plan that is not cancellable or no
    longer pending, a lock tms cannot take or did not get) and storage errors are logged."""
    try:
        wait_ms = int(max(1.0, wait_seconds - 1) * 1000)
        spec = LockSpec.from_settings({**lock_settings(params), "wait_ms": wait_ms})
        table = HudiTable.open(base_path, storage_options=options, lock=spec)
        with use_advisory_locks(locks), spec.hold(table.storage):
            written = request_cancel(table.storage, table.config, instant)
    except (CancelRefusedError, LockTimeoutError, UnsupportedTableError, BadJobInput) as exc:
        log.info("no cancel request written for %s at %s: %s", instant, base_path, exc)
        return
    except Exception as exc:
        log.warning("cancel request for %s at %s not written: %r", instant, base_path, exc)
        return
    if written:
        log.info("cancel requested on the table for %s at %s", instant, base_path)


@router.post(
    "/{operation_id}/retry",
    response_model=OperationOut,
    dependencies=[require(Role.WRITER)],
    responses={**_404, **_409},
)
def retry_operation_route(operation_id: OperationId, session: SessionDep) -> OperationOut:
    """FAILED → SCHEDULED, due now, with a fresh retry budget. CANCELLED is terminal: its
    retry is a new operation (returned) that plans anew, so a cancelled (aborted) plan is
    never run again; retrying the same cancelled operation again returns that one while it
    waits to plan."""
    operation = get_operation(session, operation_id)
    if operation.is_deleted:
        raise ApiError.conflict(
            "transition_refused", f"operation {operation_id} was removed; submit it again"
        )
    if operation.status is OperationStatus.CANCELLED:
        submitted = resubmit_cancelled(session, operation)
        session.commit()
        if submitted.created:
            observe.operation_moved(submitted.operation)
        return operation_out(session, submitted.operation)
    operation = retry_operation(session, operation_id, reason="retried by operator")
    session.commit()
    observe.operation_moved(operation)
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
