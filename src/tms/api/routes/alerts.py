"""Operator resource: alerts (what was raised, and whether the webhook got it)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from tms.api.deps import SessionDep, require
from tms.api.errors import error_responses
from tms.api.routes.tables import Cursor, parse_cursor
from tms.api.schemas.alerts import AlertOut, AlertPage
from tms.api.schemas.common import MAX_ID
from tms.config import Role
from tms.store import AlertStatus, list_alerts

router = APIRouter(
    prefix="/v1/alerts", tags=["alerts"], responses=error_responses(401, 403, 422, 503)
)

AlertKind = Literal["operation_failed", "table_silent"]


@router.get("", response_model=AlertPage, dependencies=[require(Role.VIEWER)])
def list_alerts_route(
    session: SessionDep,
    status: Annotated[AlertStatus | None, Query(description="PENDING, DELIVERED or FAILED")] = None,
    kind: Annotated[AlertKind | None, Query()] = None,
    table_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Cursor = None,
) -> AlertPage:
    """Newest first (by id); `next_cursor` is null on the last page. Each alert carries the
    JSON body the webhook receives (`payload`)."""
    rows = list_alerts(
        session,
        status=status,
        kind=kind,
        tbl_id=table_id,
        limit=limit,
        before_id=parse_cursor(cursor),
    )
    next_cursor = str(rows[-1].id) if len(rows) == limit else None
    return AlertPage(items=[AlertOut.of(a) for a in rows], next_cursor=next_cursor)
