"""`/v1/tables/{id}/measurements` (viewer): what tms measured of a registered table over time
(its layout on storage, write rate and table services' cost), read from the store only: the
measurement sweep of `tms.scheduler.measure` took them."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import AwareDatetime

from tms.api.deps import SessionDep, require
from tms.api.errors import error_responses
from tms.api.routes.tables import TableId
from tms.api.schemas.measurements import MeasurementsOut
from tms.config import Role
from tms.store import get_table, list_measurements

router = APIRouter(
    prefix="/v1/tables", tags=["measurements"], responses=error_responses(401, 403, 422, 503)
)

MAX_LIMIT = 1000


@router.get(
    "/{table_id}/measurements",
    response_model=MeasurementsOut,
    dependencies=[require(Role.VIEWER)],
    responses=error_responses(404, _404="no table with this id"),
)
def measurements_route(
    table_id: TableId,
    session: SessionDep,
    since: Annotated[
        AwareDatetime | None,
        Query(
            description="only measurements taken at or after this time (ISO 8601, with its offset)"
        ),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description="the most measurements in `items`")
    ] = 100,
    status: Annotated[
        Literal["measured", "skipped", "failed"] | None,
        Query(description="only measurements of this status"),
    ] = None,
) -> MeasurementsOut:
    """The table's newest measurement with figures and its history, newest first (skips and
    failures included, with their reason, unless `status` says otherwise). 422 names the
    query parameter at fault (`query.since`, `query.limit`, `query.status`)."""
    get_table(session, table_id)
    items = list_measurements(session, table_id, limit=limit, since=since, status=status)
    latest = list_measurements(session, table_id, limit=1, status="measured")
    return MeasurementsOut(
        table_id=table_id,
        latest=MeasurementsOut.row(latest[0]) if latest else None,
        items=[MeasurementsOut.row(row) for row in items],
    )
