"""A flaky object store: an HTTP proxy on loopback in front of an S3 server that fails a set
share of the requests it forwards, the ways S3 fails in production.

Per request, with probability `rate` (a seeded RNG, so a run repeats), one fault of `kinds`:

- `500`: `500 InternalError` with S3's XML error body; the request never reaches the store;
- `503`: `503 SlowDown` (S3's throttling answer); never reaches the store;
- `reset`: the request reaches the store, then the client's connection is reset (RST)
  without an answer: the client cannot tell whether it took effect;
- `stall`: the request reaches the store, then nothing comes back for `stall_seconds`
  (longer than the client's read timeout) and the connection is closed;
- `truncate`: the store's answer is sent with its full `Content-Length` but only half its
  body, then the connection is closed (an answer without a body is reset instead).

`counts` keeps, per request class (LIST, HEAD, GET, PUT, DELETE, MULTIPART), the requests
received and the faults injected of each kind, for a report.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

__all__ = ["FAULT_KINDS", "FaultProxy"]

FAULT_KINDS = ("500", "503", "reset", "stall", "truncate")
HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})
ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
    "<Message>{message}</Message><RequestId>fault-proxy</RequestId></Error>"
)


class QuietServer(ThreadingHTTPServer):
    """Connections the proxy reset on purpose are no errors to print."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass


def request_class(method: str, target: str) -> str:
    """S3's billing class of a request, with a multipart upload's calls apart."""
    parts = urlsplit(target)
    key = parts.path.lstrip("/").partition("/")[2]
    query = parse_qs(parts.query, keep_blank_values=True)
    if "uploads" in query or "uploadId" in query:
        return "MULTIPART"
    if method == "HEAD":
        return "HEAD"
    if method == "DELETE" or (method == "POST" and "delete" in query):
        return "DELETE"
    if method in ("PUT", "POST"):
        return "PUT"
    return "LIST" if not key else "GET"


class FaultProxy:
    """The proxy, on a free port of 127.0.0.1, forwarding to `upstream` (`http://host:port`)."""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.0,
        kinds: Sequence[str] = FAULT_KINDS,
        stall_seconds: float = 3.0,
        seed: int = 0,
    ) -> None:
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
        target = urlsplit(upstream)
        self.upstream = (target.hostname or "127.0.0.1", target.port or 80)
        self.rate = rate
        self.kinds = tuple(kinds)
        self.stall_seconds = stall_seconds
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: Counter[tuple[str, str]] = Counter()
        """(request class, "requests" or a fault kind) → how many."""
        self._server = QuietServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def set_rate(self, rate: float) -> None:
        with self._lock:
            self.rate = rate

    @contextlib.contextmanager
    def no_faults(self) -> Iterator[None]:
        """Faults off for the block (a writer's own work beside the measured one), then back
        at the rate of before."""
        rate = self.rate
        self.set_rate(0.0)
        try:
            yield
        finally:
            self.set_rate(rate)

    def snapshot(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self.counts)

    def requests(self) -> int:
        with self._lock:
            return sum(n for (_, what), n in self.counts.items() if what == "requests")

    def faults(self) -> Counter[str]:
        """Faults injected, per kind."""
        with self._lock:
            found: Counter[str] = Counter()
            for (_, what), n in self.counts.items():
                if what != "requests":
                    found[what] += n
            return found

    def _draw(self, kind: str) -> str | None:
        with self._lock:
            self.counts[(kind, "requests")] += 1
            if not self.kinds or self._rng.random() >= self.rate:
                return None
            fault = self._rng.choice(self.kinds)
            self.counts[(kind, fault)] += 1
            return fault

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: thousands of requests per run."""

            def do_GET(self) -> None:
                proxy._serve(self)

            do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

            def finish(self) -> None:
                with contextlib.suppress(OSError, ValueError):
                    super().finish()

        return Handler

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        body = _read_body(handler)
        fault = self._draw(request_class(handler.command, handler.path))
        if fault in ("500", "503"):
            code, status = ("InternalError", 500) if fault == "500" else ("SlowDown", 503)
            _answer_error(handler, status, code)
            return
        status, reason, headers, payload = self._forward(handler, body)
        if fault == "reset":
            _reset(handler)
        elif fault == "stall":
            time.sleep(self.stall_seconds)
            _reset(handler)
        elif fault == "truncate":
            if not payload or handler.command == "HEAD":
                _reset(handler)
                return
            _send_head(handler, status, reason, headers, len(payload))
            handler.wfile.write(payload[: len(payload) // 2])
            handler.wfile.flush()
            _reset(handler)
        else:
            _send_head(handler, status, reason, headers, len(payload))
            if handler.command != "HEAD":
                handler.wfile.write(payload)

    def _forward(
        self, handler: BaseHTTPRequestHandler, body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            headers = {
                name: value
                for name, value in handler.headers.items()
                if name.lower() not in HOP_HEADERS
            }
            headers["Content-Length"] = str(len(body))
            connection.request(handler.command, handler.path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            kept = [(n, v) for n, v in response.getheaders() if n.lower() not in HOP_HEADERS]
            if handler.command == "HEAD":
                length = response.getheader("Content-Length")
                if length is not None:
                    kept.append(("Content-Length", length))
            return response.status, response.reason, kept, payload
        finally:
            connection.close()


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _send_head(
    handler: BaseHTTPRequestHandler,
    status: int,
    reason: str,
    headers: list[tuple[str, str]],
    length: int,
) -> None:
    handler.send_response_only(status, reason)
    for name, value in headers:
        handler.send_header(name, value)
    if handler.command != "HEAD":
        handler.send_header("Content-Length", str(length))
    handler.end_headers()


def _answer_error(handler: BaseHTTPRequestHandler, status: int, code: str) -> None:
    message = "We encountered an internal error" if status == 500 else "Reduce your request rate"
    payload = ERROR_BODY.format(code=code, message=message).encode()
    _send_head(handler, status, code, [("Content-Type", "application/xml")], len(payload))
    if handler.command != "HEAD":
        handler.wfile.write(payload)


def _reset(handler: BaseHTTPRequestHandler) -> None:
    """Close the client's connection with a RST (SO_LINGER 0), not a clean FIN."""
    connection: socket.socket = handler.connection
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.close_connection = True
    connection.close()
