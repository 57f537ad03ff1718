"""`/v1/tables/{id}/archival`: a registered table's archival dry run (viewer): what Hudi's
archiver would move out of its active timeline now and why it stops there, read from storage
only (`tms.application.archival`), bounded by the storage timeout."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query

from tms.api.deps import SessionDep, StorageCallsDep, require
from tms.api.errors import ApiError, error_responses, table_read_errors
from tms.api.routes.tables import TableId
from tms.api.schemas.archival import ArchivalPlanOut
from tms.api.table_reads import read_table
from tms.application.archival import archival_table
from tms.config import Role
from tms.http.storage_calls import call_storage
from tms.hudi.table import HudiTable
from tms.planning import BadJobInput

router = APIRouter(
    prefix="/v1/tables", tags=["archival"], responses=error_responses(401, 403, 422, 503)
)

MAX_KEEP = 100_000
Keep = Annotated[int | None, Query(ge=1, le=MAX_KEEP)]
_STORAGE = table_read_errors("a table tms does not read")


def _invalid(exc: BadJobInput) -> ApiError:
    """A keep.min/keep.max pair Hudi refuses, named by its query parameter."""
    text = str(exc).removeprefix("extra_params ")
    field, _, message = text.partition(": ")
    return ApiError.invalid(f"query.{field}", message or text)


@router.get(
    "/{table_id}/archival",
    response_model=ArchivalPlanOut,
    dependencies=[require(Role.VIEWER)],
    responses=_STORAGE,
)
def dry_run_route(
    table_id: TableId,
    session: SessionDep,
    calls: StorageCallsDep,
    keep_min: Keep = None,
    keep_max: Keep = None,
) -> ArchivalPlanOut:
    """What an archival would archive now (nothing is written): the instants, the earliest
    commit left, and the rule it stops at. `keep_min`/`keep_max` stand for
    hoodie.keep.min.commits/hoodie.keep.max.commits (default: the table policy's, else the
    table's, else Hudi's 20 and 30); 422 names the one at fault."""
    if keep_min is not None and keep_max is not None and keep_max <= keep_min:
        raise ApiError.invalid("query.keep_max", f"must be greater than keep_min ({keep_min})")
    target = archival_table(session, table_id)
    try:
        dry_run = target.dry_run(keep_min, keep_max)
    except BadJobInput as exc:
        raise _invalid(exc) from None

    def read(table: HudiTable) -> dict[str, Any]:
        try:
            return dry_run(table)
        except BadJobInput as exc:
            raise _invalid(exc) from None

    found = call_storage(
        calls, partial(read_table, target.base_path, target.options, target.name, "archival", read)
    )
    return ArchivalPlanOut(table_id=table_id, **found)
