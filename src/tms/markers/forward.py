"""Forwarding a marker request to the instance that owns the table (`tms.markers.ownership`).

The owner answers as if the writer had asked it; a forwarded request carries
`FORWARDED_HEADER`, and an instance that does not own the table either refuses it (503)
instead of forwarding it again.
"""

from __future__ import annotations

import logging

import httpx
from starlette.requests import Request
from starlette.responses import Response

from tms.http.errors import ApiError

__all__ = ["FORWARDED_HEADER", "OwnerUnavailable", "forward"]

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Tms-Marker-Forwarded"
FORWARD_TIMEOUT_SECONDS = 300.0
"""Hudi's client waits `hoodie.filesystem.view.remote.timeout.secs` (300 by default)."""


class OwnerUnavailable(ApiError):
    """503: the instance serving the table's markers cannot be reached (or is unknown)."""

    def __init__(self, address: str) -> None:
        where = f" ({address})" if address else ""
        super().__init__(
            503,
            "marker_owner_unavailable",
            f"the instance serving this table's markers{where} does not answer; retry later",
        )


async def forward(request: Request, address: str) -> Response:
    """The owner's answer to the same request."""
    if not address or request.headers.get(FORWARDED_HEADER):
        raise OwnerUnavailable(address)
    url = address.rstrip("/") + request.url.path
    try:
        async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT_SECONDS) as client:
            answer = await client.request(
                request.method,
                url,
                params=list(request.query_params.multi_items()),
                headers={FORWARDED_HEADER: "1"},
                content=await request.body(),
            )
    except httpx.HTTPError as exc:
        log.warning("forwarding %s to the marker owner %s failed: %s", request.url.path, url, exc)
        raise OwnerUnavailable(address) from None
    return Response(
        answer.content,
        status_code=answer.status_code,
        media_type=answer.headers.get("content-type"),
    )
