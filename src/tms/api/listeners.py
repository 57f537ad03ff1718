"""Which listener answers what, when the open timeline-server routes have a port of their own
(`timeline_server_port`): they answer only there, and the rest of the API only on the main
port. An operator can then expose the credential-less routes to writers' networks alone and
keep the API (and its tokens) on another address."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from tms.http.errors import error_body

__all__ = ["OPEN_ROUTE_PREFIXES", "ListenerSplit"]

OPEN_ROUTE_PREFIXES = ("/v1/hoodie/view/", "/v1/hoodie/marker/")
"""Hudi's timeline-server protocol: the routes that take no credentials."""


class ListenerSplit:
    """Pure ASGI: 404 for an open route asked on the main port, or another route asked on
    the timeline server's port (the connection's local port tells which)."""

    def __init__(self, app: ASGIApp, timeline_server_port: int | None) -> None:
        self.app = app
        self.port = timeline_server_port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.port is None:
            await self.app(scope, receive, send)
            return
        server = scope.get("server")
        on_timeline_port = server is not None and server[1] == self.port
        open_route = str(scope["path"]).startswith(OPEN_ROUTE_PREFIXES)
        if open_route == on_timeline_port:
            await self.app(scope, receive, send)
            return
        where = "timeline_server_port" if open_route else "the API's port"
        body = json.dumps(
            error_body("not_found", f"this route is served on {where}, not on this port")
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 404,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
