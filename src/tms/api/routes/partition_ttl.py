"""`/v1/tables/{id}/partition-ttl`: a registered table's partition TTL dry run (viewer): the
partitions a partition TTL of `days` days would delete now and those it keeps, each with its
last commit time and why, read from storage only (`tms.application.partition_ttl`), bounded
by the storage timeout."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query

from tms.api.deps import SessionDep, StorageCallsDep, require
from tms.api.errors import ApiError, error_responses, table_read_errors
from tms.api.routes.tables import TableId
from tms.api.schemas.partition_ttl import PartitionTtlOut
from tms.api.table_reads import read_table
from tms.application.partition_ttl import ttl_table
from tms.config import Role
from tms.http.storage_calls import call_storage
from tms.planning import DEFAULT_TTL_MAX_PARTITIONS, MAX_TTL_DAYS, ttl_patterns

router = APIRouter(
    prefix="/v1/tables", tags=["partition ttl"], responses=error_responses(401, 403, 422, 503)
)

_STORAGE = table_read_errors("a table tms does not read")


@router.get(
    "/{table_id}/partition-ttl",
    response_model=PartitionTtlOut,
    dependencies=[require(Role.VIEWER)],
    responses=_STORAGE,
)
def dry_run_route(
    table_id: TableId,
    session: SessionDep,
    calls: StorageCallsDep,
    days: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_TTL_DAYS,
            description="partitions whose last commit is older go; default the table "
            "policy's ttl_days",
        ),
    ] = None,
    partitions: Annotated[
        str | None,
        Query(
            max_length=4000,
            description="comma-separated glob patterns over partition paths (* matches any "
            "characters, / included); default the table policy's ttl_partitions, else every "
            "partition",
        ),
    ] = None,
    max_partitions: Annotated[
        int | None,
        Query(
            ge=1,
            le=1_000_000,
            description="the most partitions one run deletes; default the table policy's "
            f"ttl_max_partitions, else {DEFAULT_TTL_MAX_PARTITIONS}",
        ),
    ] = None,
) -> PartitionTtlOut:
    """What a partition TTL would delete now (nothing is written): the expired partitions,
    and the selected ones it keeps with why (not expired, or pending work holds them), with
    the table policy's TTL settings where the query gives none. 422 names the query parameter
    at fault (`query.days`: none given and none in the policy)."""
    target = ttl_table(session, table_id)
    asked = ttl_patterns(partitions) if partitions is not None else None
    chosen, patterns, most = target.settings(days, asked, max_partitions)
    if chosen is None:
        raise ApiError.invalid("query.days", "required: the table's policy sets no ttl_days")
    read = target.dry_run(chosen, patterns, most)
    found = call_storage(
        calls,
        partial(read_table, target.base_path, target.options, target.name, "partition_ttl", read),
    )
    return PartitionTtlOut(table_id=table_id, **found)
