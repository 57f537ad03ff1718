"""A tiny scripted HTTP server standing in for the job-side API (error paths only; the real
API is tested against the real job elsewhere)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, Any]


@dataclass
class StubApi:
    """Routes are `"METHOD /suffix"` after `/v1/jobs/attempts/{id}`; each holds replies used
    in order (the last one repeats), or a function of the request body."""

    routes: dict[str, list[Reply] | Callable[[Any], Reply]] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None, Any]] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def calls(self, route: str) -> list[Any]:
        with self.lock:
            return [body for method, path, _, body in self.requests if route == f"{method} {path}"]

    def reply(self, method: str, path: str, auth: str | None, body: Any) -> Reply:
        suffix = "/" + path.rstrip("/").rsplit("/", 1)[-1]
        with self.lock:
            self.requests.append((method, suffix, auth, body))
            route = self.routes.get(f"{method} {suffix}")
            if route is None:
                return 404, {"detail": "no such route"}
            if callable(route):
                return route(body)
            return route.pop(0) if len(route) > 1 else route[0]


@contextmanager
def stub_api(routes: dict[str, Any]) -> Iterator[StubApi]:
    api = StubApi(routes)

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            status, payload = api.reply(
                self.command, self.path, self.headers.get("Authorization"), body
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def spec_json(**overrides: Any) -> dict[str, Any]:
    spec = {
        "attempt_id": 5,
        "operation_id": 3,
        "action": "compaction",
        "instant": None,
        "base_path": "/nowhere",
        "db_name": "db",
        "table_name": "t",
        "parallelism": None,
        "resource": None,
        "extra_params": {},
        "heartbeat_interval_seconds": 0.1,
        "cancel_requested": False,
    }
    spec.update(overrides)
    return spec


OK_BEAT: Reply = (200, {"lease_expires_at": "2030-01-01T00:00:00+00:00", "cancel_requested": False})
