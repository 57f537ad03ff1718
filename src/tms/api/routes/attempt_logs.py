"""`GET /v1/operations/{id}/attempts/{attempt_id}/log`: the end of an attempt's job log, as
plain text, when the log is a file under this instance's `TMS_LOG_DIR` (the instance that
launched it, or a worker it started). Paths come from the database: one that resolves
outside the log directory is never opened."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi import Path as PathParam

from tms.api.deps import SessionDep, SettingsDep, require
from tms.api.errors import ApiError, error_responses
from tms.api.routes.operations import OperationId
from tms.api.schemas.common import MAX_ID
from tms.config import Role
from tms.store import Attempt, get_operation

router = APIRouter(
    prefix="/v1/operations", tags=["operations"], responses=error_responses(401, 403, 422, 503)
)
log = logging.getLogger(__name__)

AttemptId = Annotated[int, PathParam(ge=1, le=MAX_ID, description="the attempt's id")]
MAX_LOG_BYTES = 1 << 20


@router.get(
    "/{operation_id}/attempts/{attempt_id}/log",
    response_class=Response,
    dependencies=[require(Role.VIEWER)],
    responses={
        200: {"content": {"text/plain": {}}, "description": "the log's last `bytes` bytes"},
        **error_responses(
            404, _404="no such attempt, it has no log, or its log is not on this instance"
        ),
    },
)
def attempt_log_route(
    operation_id: OperationId,
    attempt_id: AttemptId,
    session: SessionDep,
    settings: SettingsDep,
    max_bytes: Annotated[int, Query(alias="bytes", ge=1, le=MAX_LOG_BYTES)] = 65536,
) -> Response:
    """The last `bytes` bytes of the log (invalid UTF-8 replaced); `X-Log-Truncated: true`
    when the log is longer."""
    attempt = session.get(Attempt, attempt_id)
    if attempt is None or attempt.operation_id != operation_id:
        get_operation(session, operation_id)  # 404 naming the operation when it is unknown
        raise ApiError.not_found(f"operation {operation_id} has no attempt {attempt_id}")
    log_path, instance_id = attempt.log_path, attempt.instance_id
    session.rollback()  # (expires `attempt`: read above, not reloaded)
    if not log_path:
        raise ApiError.not_found(f"attempt {attempt_id} has no log")
    path = _inside(settings.job_log_dir, log_path)
    if path is None:
        raise ApiError.not_found(
            f"the log of attempt {attempt_id} is not on this instance (it ran on "
            f"{instance_id}); read it there"
        )
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            file.seek(max(0, size - max_bytes))
            data = file.read(max_bytes)
    except OSError as exc:
        log.warning("log of attempt %s at %s: %s", attempt_id, path, exc)
        raise ApiError.not_found(f"the log of attempt {attempt_id} cannot be read here") from None
    return Response(
        data.decode("utf-8", errors="replace"),
        media_type="text/plain; charset=utf-8",
        headers={
            "X-Log-Truncated": str(size > max_bytes).lower(),
            "X-Content-Type-Options": "nosniff",
        },
    )


def _inside(log_dir: Path, log_path: str) -> Path | None:
    """`log_path` resolved (links followed), if it is a regular file under `log_dir`."""
    try:
        root = log_dir.resolve()
        path = Path(log_path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if not path.is_relative_to(root) or not path.is_file():
        return None
    return path
