"""`GET /v1/tables/{id}/file-groups`: a table's file groups and slices as storage shows them
now, for the operator console (read with `tms.hudi`, bounded by the storage timeout)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from tms.api.deps import SessionDep, StorageCallsDep, require
from tms.api.errors import error_responses, table_read_errors
from tms.api.routes.tables import TableId
from tms.api.schemas.overview import FileGroupOut, FileGroupsOut
from tms.api.table_reads import read_registered_table
from tms.config import Role
from tms.hudi.files.fs_view import FileGroup
from tms.hudi.table import HudiTable

router = APIRouter(
    prefix="/v1/tables", tags=["tables"], responses=error_responses(401, 403, 422, 503)
)


@router.get(
    "/{table_id}/file-groups",
    response_model=FileGroupsOut,
    dependencies=[require(Role.VIEWER)],
    responses=table_read_errors("a table version or feature tms does not read"),
)
def file_groups_route(
    table_id: TableId,
    session: SessionDep,
    calls: StorageCallsDep,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
) -> FileGroupsOut:
    """Totals over every file group, and the first `limit` groups (by partition and file
    id) with their slice count and latest slice: base file, log files, sizes."""
    groups = read_registered_table(session, calls, table_id, "file_groups", _file_groups)
    groups.sort(key=lambda g: (g.partition_path, g.file_id))
    slices = [s for g in groups for s in g.slices]
    return FileGroupsOut(
        table_id=table_id,
        partitions=len({g.partition_path for g in groups}),
        file_groups=len(groups),
        slices=len(slices),
        log_files=sum(len(s.log_files) for s in slices),
        total_size=sum(s.total_size for s in slices),
        items=[_group_out(g) for g in groups[:limit]],
        truncated=len(groups) > limit,
    )


def _group_out(group: FileGroup) -> FileGroupOut:
    latest = group.latest_slice
    return FileGroupOut(
        partition=group.partition_path,
        file_id=group.file_id,
        slices=len(group.slices),
        base_instant=latest.base_instant_time,
        base_file=latest.base_file.file_name if latest.base_file else None,
        base_file_size=latest.base_file.size if latest.base_file else 0,
        log_files=len(latest.log_files),
        log_size=latest.log_size,
        total_size=sum(s.total_size for s in group.slices),
    )


def _file_groups(table: HudiTable) -> list[FileGroup]:
    return list(table.file_system_view().file_groups)
