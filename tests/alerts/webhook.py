"""A real local HTTP server standing in for the operators' webhook: it answers with the
statuses it was given, in order (the last one for every request after), and keeps what it
received."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Webhook:
    url: str
    statuses: list[int]
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, request: Received) -> int:
        with self.lock:
            status = self.statuses[min(len(self.received), len(self.statuses) - 1)]
            self.received.append(request)
        return status


def _handler(hook: list[Webhook]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            status = hook[0].answer(
                Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            text = b"ok" if status < 300 else b"webhook down\nfor maintenance"
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def webhook(*statuses: int) -> Iterator[Webhook]:
    """A webhook on 127.0.0.1 (a free port) answering `statuses` in turn."""
    box: list[Webhook] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(box))
    box.append(Webhook(f"http://127.0.0.1:{server.server_port}/hooks/tms", list(statuses)))
    thread = threading.Thread(target=server.serve_forever, name="test-webhook", daemon=True)
    thread.start()
    try:
        yield box[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
