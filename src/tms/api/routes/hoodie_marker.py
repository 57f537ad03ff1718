"""Hudi's timeline-server marker API (`MarkerOperation`), for writers configured with
`hoodie.write.markers.type=TIMELINE_SERVER_BASED` and a remote timeline server.

Hudi's Java client sends no API key, so these routes take no bearer token; they serve only
registered tables, and only while `timeline_server_enabled`. Every parameter is a query
parameter, as the client sends them: `markerdirpath` (`<basePath>/.hoodie/.temp/<instant>`),
`markername` (`<partition>/<dataFile>.marker.<TYPE>`) and, when the writer enables early
conflict detection, `basepath`. Answers are JSON as Hudi's server writes them: a set of
marker names, or a boolean (`false` for a marker that exists already or that early conflict
detection refuses, which the client turns into `HoodieEarlyConflictDetectionException`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from tms.api.client_networks import check_client_network
from tms.api.errors import ApiError, error_responses
from tms.config import Settings
from tms.hudi.errors import HudiError, UnsafePathError
from tms.hudi.files.markers import MarkerType, parse_marker_name
from tms.markers import MarkerHandler, MarkerServer, MarkerTarget

log = logging.getLogger(__name__)
T = TypeVar("T")

router = APIRouter(
    prefix="/v1/hoodie/marker",
    tags=["hudi timeline server"],
    responses=error_responses(403, 404, 409, 422, 502, 503),
    include_in_schema=False,  # Hudi's protocol (README), not the API's: no token, no schema
)

MarkerDirQuery = Annotated[
    str, Query(description="the instant's marker folder: <basePath>/.hoodie/.temp/<instant>")
]
MarkerNameQuery = Annotated[
    str, Query(description="<partition>/<dataFileName>.marker.<CREATE|MERGE|APPEND>")
]
BasePathQuery = Annotated[
    str | None,
    Query(description="the table's base path; sent when early conflict detection is on"),
]


class StorageFailed(ApiError):
    """502: the table's storage could not be read or written (the cause is in the log)."""

    def __init__(self) -> None:
        super().__init__(
            502, "storage_error", "the table's storage could not be read or written; retry later"
        )


async def _stored(call: Awaitable[T]) -> T:
    """The handler's answer; storage failures become 502 (their text stays in the log)."""
    try:
        return await call
    except (OSError, HudiError) as exc:
        log.error("marker request failed on storage: %s", exc)
        raise StorageFailed() from None


def _json(value: Any) -> Response:
    """JSON as Hudi's server writes it; a set of marker names goes sorted."""
    if isinstance(value, set):
        value = sorted(value)
    return Response(json.dumps(value), media_type="application/json")


def _server(request: Request) -> MarkerServer:
    settings: Settings = request.app.state.settings
    if not settings.timeline_server_enabled:
        raise ApiError(
            404, "not_found", "timeline-server markers are not served (timeline_server_enabled)"
        )
    check_client_network(request, settings)
    server: MarkerServer = request.app.state.markers
    return server


async def _resolve(
    request: Request, marker_dir: str, base_path: str | None = None
) -> tuple[MarkerServer, MarkerTarget, Response | None]:
    """The target, and the owner's answer when another instance serves the table."""
    server = _server(request)
    target = await server.target(marker_dir, base_path)
    return server, target, await server.elsewhere(request, target)


async def _answer(
    request: Request,
    marker_dir: str,
    call: Callable[[MarkerHandler, MarkerTarget], Awaitable[Any]],
    base_path: str | None = None,
) -> Response:
    """The owner's answer when another instance serves the table, else `call`'s here."""
    server, target, forwarded = await _resolve(request, marker_dir, base_path)
    if forwarded is not None:
        return forwarded
    return _json(await _stored(call(server.handler, target)))


@router.get("/all", summary="All markers of an instant")
async def all_markers(request: Request, markerdirpath: MarkerDirQuery = "") -> Response:
    return await _answer(
        request, markerdirpath, lambda s, t: s.all_markers(t.table, t.instant_time)
    )


@router.get("/create-and-merge", summary="CREATE and MERGE markers of an instant")
async def create_and_merge_markers(
    request: Request, markerdirpath: MarkerDirQuery = ""
) -> Response:
    types = {MarkerType.CREATE, MarkerType.MERGE}
    return await _answer(
        request, markerdirpath, lambda s, t: s.markers_of_type(t.table, t.instant_time, types)
    )


@router.get("/append", summary="APPEND markers of an instant (table version 6)")
async def append_markers(request: Request, markerdirpath: MarkerDirQuery = "") -> Response:
    types = {MarkerType.APPEND}
    return await _answer(
        request, markerdirpath, lambda s, t: s.markers_of_type(t.table, t.instant_time, types)
    )


@router.get("/dir/exists", summary="Whether an instant's marker folder exists")
async def marker_dir_exists(request: Request, markerdirpath: MarkerDirQuery = "") -> Response:
    return await _answer(request, markerdirpath, lambda s, t: s.exists(t.table, t.instant_time))


@router.post("/create", summary="Create a marker (early conflict detection with basepath)")
async def create_marker(
    request: Request,
    markerdirpath: MarkerDirQuery = "",
    markername: MarkerNameQuery = "",
    basepath: BasePathQuery = None,
) -> Response:
    try:  # checked before anything else: nothing is written for a name outside the table
        parse_marker_name(markername, "markername")
    except UnsafePathError as exc:
        raise ApiError.invalid("markername", f"{markername!r} {exc.reason}") from None
    server, target, forwarded = await _resolve(request, markerdirpath, basepath or None)
    if forwarded is not None:
        return forwarded
    await _stored(server.admit(target))
    detect = bool(basepath)
    return _json(
        await _stored(
            server.handler.create(target.table, target.instant_time, markername, detect=detect)
        )
    )


@router.post("/dir/delete", summary="Delete an instant's markers")
async def delete_marker_dir(request: Request, markerdirpath: MarkerDirQuery = "") -> Response:
    return await _answer(request, markerdirpath, lambda s, t: s.delete(t.table, t.instant_time))
