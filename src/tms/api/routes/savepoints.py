"""`/v1/tables/{id}/savepoints`: a table's savepoints listed (viewer), made (writer) and
removed (admin) by the service on the table itself (`tms.hudi.savepoints`), under the lock its
writers use, each call bounded by the storage timeout."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Path, Response

from tms.api.deps import SessionDep, StorageCallsDep, TableAccessDep, require
from tms.api.errors import ApiError, error_responses, table_read_errors
from tms.api.routes.tables import TableId
from tms.api.schemas.common import Instant
from tms.api.schemas.savepoints import SavepointIn, SavepointOut, SavepointPage, SavepointWritten
from tms.api.table_reads import read_registered_table, read_table
from tms.application.savepoints import savepoint_table
from tms.config import Role
from tms.http.storage_calls import call_storage
from tms.hudi.savepoints import Savepoint, list_savepoints

router = APIRouter(
    prefix="/v1/tables", tags=["savepoints"], responses=error_responses(401, 403, 422, 503)
)

_STORAGE = table_read_errors(
    "a table tms does not read, a savepoint refused, or the writers' lock held"
)


def _out(savepoint: Savepoint) -> SavepointOut:
    return SavepointOut(
        instant=savepoint.instant_time,
        completion_time=savepoint.completion_time,
        savepointed_by=savepoint.savepointed_by,
        savepointed_at=savepoint.savepointed_at,
        comment=savepoint.comments,
        partitions=savepoint.partitions,
        files=savepoint.files,
    )


@router.get(
    "/{table_id}/savepoints",
    response_model=SavepointPage,
    dependencies=[require(Role.VIEWER)],
    responses=_STORAGE,
)
def list_route(table_id: TableId, session: SessionDep, calls: StorageCallsDep) -> SavepointPage:
    """The table's completed savepoints, read from its timeline."""
    found = read_registered_table(session, calls, table_id, "savepoints", list_savepoints)
    return SavepointPage(table_id=table_id, items=[_out(s) for s in found])


@router.post(
    "/{table_id}/savepoints",
    response_model=SavepointWritten,
    status_code=201,
    dependencies=[require(Role.WRITER)],
    responses={
        **_STORAGE,
        **error_responses(400, 413),
        200: {"description": "the savepoint stood already"},
    },
)
def create_route(
    table_id: TableId,
    body: SavepointIn,
    response: Response,
    session: SessionDep,
    calls: StorageCallsDep,
    access: TableAccessDep,
) -> SavepointWritten:
    """Savepoint a completed write: 201 when made, 200 when it stood already (nothing is
    written then). 409 `savepoint_refused` names why an instant cannot be savepointed."""
    target = savepoint_table(session, table_id, access)
    made = target.create(body.instant, body.user, body.comment)
    call = partial(
        read_table, target.base_path, target.options, target.name, "savepoint", made, target.lock()
    )
    savepoint, created = call_storage(calls, call)
    if not created:
        response.status_code = 200
    return SavepointWritten(table_id=table_id, savepoint=_out(savepoint), created=created)


@router.delete(
    "/{table_id}/savepoints/{instant}",
    dependencies=[require(Role.ADMIN)],
    status_code=204,
    responses={**_STORAGE, 404: {"description": "no such table or savepoint"}},
)
def delete_route(
    table_id: TableId,
    instant: Annotated[Instant, Path(description="the savepoint's instant")],
    session: SessionDep,
    calls: StorageCallsDep,
    access: TableAccessDep,
) -> Response:
    """Remove a savepoint: the cleaner may then delete the files it kept."""
    target = savepoint_table(session, table_id, access)
    removed = target.delete(instant)
    call = partial(
        read_table, target.base_path, target.options, target.name, "savepoint", removed,
        target.lock(),
    )  # fmt: skip
    if not call_storage(calls, call):
        raise ApiError(404, "not_found", f"table {table_id} has no savepoint at {instant}")
    return Response(status_code=204)
