"""`/v1/tables/{id}/partition-ttl`: a registered table's partition TTL dry run (viewer): the
partitions a partition TTL of `days` days would delete now and those it keeps, each with its
last commit time and why, read from storage only (`tms.application.partition_ttl`), bounded
by the storage timeout."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query

from tms.api.deps import SessionDep, StorageCallsDep, require
from tms.api.errors import error_responses, table_read_errors
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
        int,
        Query(ge=1, le=MAX_TTL_DAYS, description="partitions whose last commit is older go"),
    ],
    partitions: Annotated[
        str | None,
        Query(
            max_length=4000,
            description="comma-separated glob patterns over partition paths (* matches any "
            "characters, / included); default every partition",
        ),
    ] = None,
    max_partitions: Annotated[
        int, Query(ge=1, le=1_000_000, description="the most partitions one run deletes")
    ] = DEFAULT_TTL_MAX_PARTITIONS,
) -> PartitionTtlOut:
    """What a partition TTL would delete now (nothing is written): the expired partitions,
    and the selected ones it keeps with why (not expired, or pending work holds them). 422
    names the query parameter at fault (`query.days`)."""
    target = ttl_table(session, table_id)
    read = target.dry_run(days, ttl_patterns(partitions or ""), max_partitions)
    found = call_storage(
        calls,
        partial(read_table, target.base_path, target.options, target.name, "partition_ttl", read),
    )
    return PartitionTtlOut(table_id=table_id, **found)
