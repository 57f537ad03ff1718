"""Hudi's remote file-system view (`/v1/hoodie/view/...`, the timeline server's view API),
answered from `tms.view`'s per-table cache.

Hudi's Java client sends no credentials, so these routes take no bearer token; they answer
only for registered tables (`basepath`) and only while `timeline_server_enabled`. Answers
are Hudi's JSON DTOs; refusals are the API's error body with the status Hudi's client
treats as a failed call (it then reads storage itself). They are Hudi's wire protocol, not
the tms API: left out of the OpenAPI document (the README lists what is served).
"""

from __future__ import annotations

import threading
from functools import partial

from fastapi import APIRouter, Request, Response

from tms.api.client_networks import check_client_network
from tms.api.deps import SettingsDep, StorageCallsDep
from tms.http.errors import ApiError
from tms.http.storage_calls import call_storage
from tms.view.cache import ViewCache
from tms.view.handler import ViewHandler

__all__ = ["router", "view_handler"]

PREFIX = "/v1/hoodie/view"
router = APIRouter(prefix=PREFIX, tags=["hudi timeline server"])
_CREATE = threading.Lock()


def view_handler(request: Request, max_tables: int) -> ViewHandler:
    """The app's view handler, made on first use (one cache per application)."""
    handler: ViewHandler | None = getattr(request.app.state, "view_handler", None)
    if handler is None:
        with _CREATE:
            handler = getattr(request.app.state, "view_handler", None)
            if handler is None:
                interval = request.app.state.settings.view_sync_interval_seconds
                handler = ViewHandler(ViewCache(max_tables), sync_interval=interval)
                request.app.state.view_handler = handler
    return handler


_DOC = (
    "RemoteHoodieTableFileSystemView's calls (basepath, partition, fileid, maxinstant, "
    "mininstant, instant, instants, includependingcompaction, lastinstantts, timelinehash, "
    "refreshoff); see the README's Timeline server section."
)


@router.api_route(
    "/{path:path}",
    methods=["GET", "POST"],
    summary="Hudi's remote file-system view: reads (GET), refresh and loads (POST)",
    description=_DOC,
    include_in_schema=False,
)
def hoodie_view(
    path: str, request: Request, settings: SettingsDep, calls: StorageCallsDep
) -> Response:
    """The answer, computed on one of the bounded storage threads and waited on for at most
    the storage timeout (503 `storage_busy` when all are taken, 504 `storage_timeout`): a
    hung storage costs the client its call, which it then makes on storage itself."""
    if not settings.timeline_server_enabled:
        raise ApiError(404, "not_found", "the timeline server is disabled")
    check_client_network(request, settings)
    handler = view_handler(request, settings.view_cache_tables)
    query = {key: request.query_params[key] for key in request.query_params}
    answer = call_storage(
        calls,
        partial(handler.answer, request.app.state.session_factory, path, request.method, query),
    )
    return Response(content=answer.body, media_type="application/json")
