"""The request gate: callers are authenticated and bodies bounded before a body is read.

Bodies are streamed from a generator that counts what the server pulled, so "not read" is
asserted exactly instead of inferred from memory or time.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session, sessionmaker

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, bearer, make_settings
from tests.api.helpers import callback_payload, instant, write_stat
from tms.api import create_app
from tms.api.gate import route_guard
from tms.config import load_settings
from tms.serve import free_port, serve_in_thread

MIB = 1024 * 1024
ANSWER_TIMEOUT = 60.0
"""A generous bound on waiting for an answer; a server reading the whole body never gives
one, since the test never sends it."""
CALLBACK_URL = "/v1/hoodie/service/commit"
TABLE = {"db_name": "lake", "table_name": "trips", "base_path": "/data/lake/trips"}


@dataclass
class Body:
    """A chunked body of `chunks` × `size` bytes that counts the chunks pulled from it."""

    chunks: int
    size: int = MIB
    pulled: int = field(default=0, init=False)

    async def stream(self) -> AsyncIterator[bytes]:
        for _ in range(self.chunks):
            self.pulled += 1
            yield b" " * self.size


def _post(
    app: Any, url: str, content: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tms") as http:
            return await http.post(url, content=content, headers=headers or {})

    return asyncio.run(send())


def _error(response: httpx.Response) -> tuple[int, str, str | None]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["field"]


def test_unauthenticated_150_mb_chunked_posts_get_401_unread(
    factory: sessionmaker[Session],
) -> None:
    app = create_app(make_settings(auth_tokens=AUTH_TOKENS, callback_keys="k-77b1"), factory)
    for url, headers in [
        ("/v1/tables", {}),
        ("/v1/tables", bearer("who-knows")),
        ("/v1/hoodie/service/register", {}),
        ("/v1/operations/1/cancel", {}),
        (CALLBACK_URL, {"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}),
        ("/v1/jobs/attempts/1/result", bearer("not-a-job-token")),
        ("/v1/jobs/attempts/1/heartbeat", {}),
    ]:
        body = Body(chunks=150)
        response = _post(app, url, body.stream(), headers)
        assert (response.status_code, response.json()["error"]["code"]) == (401, "unauthorized")
        assert body.pulled <= 1, (url, body.pulled)


def test_a_role_too_low_gets_403_unread(factory: sessionmaker[Session]) -> None:
    app = create_app(make_settings(auth_tokens=AUTH_TOKENS), factory)
    body = Body(chunks=150)
    response = _post(app, "/v1/tables", body.stream(), bearer(VIEWER))
    assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden")
    assert body.pulled <= 1


def test_job_routes_need_the_job_token_even_with_auth_off(factory: sessionmaker[Session]) -> None:
    app = create_app(make_settings(), factory)
    body = Body(chunks=150)
    response = _post(app, "/v1/jobs/attempts/1/result", body.stream(), bearer(ADMIN))
    assert response.status_code == 401
    assert body.pulled <= 1


def test_authenticated_oversize_chunked_body_gets_413_at_the_limit(
    factory: sessionmaker[Session],
) -> None:
    app = create_app(make_settings(auth_tokens=AUTH_TOKENS, max_request_bytes=64 * 1024), factory)
    body = Body(chunks=1000, size=16 * 1024)
    response = _post(app, "/v1/tables", body.stream(), bearer(ADMIN))
    assert _error(response) == (413, "payload_too_large", "body")
    assert "65536 bytes" in response.json()["error"]["message"]
    assert body.pulled <= 5  # 64 KiB in 16 KiB chunks, and the one that passed the limit


def test_oversize_callback_body_gets_413_at_its_own_limit(factory: sessionmaker[Session]) -> None:
    app = create_app(make_settings(max_callback_bytes=64 * 1024), factory)
    body = Body(chunks=1000, size=16 * 1024)
    key = {"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}
    response = _post(app, CALLBACK_URL, body.stream(), key)
    assert _error(response) == (413, "payload_too_large", "body")
    assert body.pulled <= 5


def test_content_length_over_the_limit_gets_413_before_any_byte_is_read(
    factory: sessionmaker[Session],
) -> None:
    app = create_app(make_settings(auth_tokens=AUTH_TOKENS), factory)
    declared = {"Content-Length": str(150 * MIB)}
    for url, headers in [
        ("/v1/tables", bearer(ADMIN)),
        ("/v1/tables", {}),  # the size is refused before the caller is looked at
        (CALLBACK_URL, bearer(ADMIN)),
    ]:
        body = Body(chunks=150)
        response = _post(app, url, body.stream(), {**headers, **declared})
        assert _error(response) == (413, "payload_too_large", "body"), url
        assert body.pulled == 0


def test_a_content_length_that_is_not_a_number_is_400(factory: sessionmaker[Session]) -> None:
    app = create_app(make_settings(), factory)
    body = Body(chunks=1)
    response = _post(app, "/v1/tables", body.stream(), {"Content-Length": "lots"})
    assert _error(response) == (400, "bad_request", "header.content-length")
    assert _raw_status(app, [(b"content-length", "²".encode("latin-1"))]) == 400


def _raw_status(app: Any, headers: list[tuple[bytes, bytes]]) -> int:
    """POST /v1/tables with headers no HTTP client would send; the status answered."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/tables",
        "raw_path": b"/v1/tables",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("tms", 80),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body was read")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status: int = sent[0]["status"]
    return status


def test_each_route_has_its_limit(factory: sessionmaker[Session]) -> None:
    """A callback body over TMS_MAX_REQUEST_BYTES is fine (the callback has its own limit);
    the same size to another route is refused, with or without a Content-Length."""
    app = create_app(make_settings(max_request_bytes=8 * 1024), factory)
    payload = callback_payload(instant(), stats=[write_stat(log=True)] * 20)
    encoded = json.dumps(payload).encode()
    assert len(encoded) > 8 * 1024
    key = {"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}
    accepted = _post(app, CALLBACK_URL, encoded, {**key, "Content-Type": "application/json"})
    assert accepted.status_code == 200, accepted.text
    padded = json.dumps({**TABLE, "owner": "x" * 9000}).encode()
    declared = _post(app, "/v1/tables", padded, {"Content-Type": "application/json"})
    assert _error(declared) == (413, "payload_too_large", "body")

    async def chunked() -> AsyncIterator[bytes]:
        yield padded

    streamed = _post(app, "/v1/tables", chunked(), {"Content-Type": "application/json"})
    assert _error(streamed) == (413, "payload_too_large", "body")
    other = {**TABLE, "table_name": "fares", "base_path": "/data/lake/fares"}
    small = _post(
        app,
        "/v1/tables?pending=true",
        json.dumps(other).encode(),
        {"Content-Type": "application/json"},
    )
    assert small.status_code == 201, small.text


def _answer_to_headers_and_first_chunk(url: str, path: str, headers: dict[str, str]) -> bytes:
    """Send a chunked POST's headers and its first 1 MiB chunk only, and read the answer:
    a server that waited for the body would never answer."""
    host, port = url.removeprefix("http://").split(":")
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n"
        f"Content-Type: application/json\r\n{head}\r\n"
    ).encode()
    chunk = b" " * MIB
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT) as sock:
        sock.sendall(request + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    return answer


def test_a_running_service_answers_before_the_body_arrives(db_url: str, tmp_path: Path) -> None:
    settings = load_settings(
        config_file=False,
        environ={},
        database_url=db_url,
        data_dir=tmp_path,
        port=free_port(),
        max_running_per_instance=0,
        auth_tokens=AUTH_TOKENS,
    )
    with serve_in_thread(settings) as service:
        refused = _answer_to_headers_and_first_chunk(service.url, "/v1/tables", {})
        assert refused.startswith(b"HTTP/1.1 401 "), refused[:200]
        assert b'"code":"unauthorized"' in refused
        declared = {"Authorization": f"Bearer {ADMIN}", "Content-Length": str(150 * MIB)}
        host, port = service.url.removeprefix("http://").split(":")
        head = "".join(f"{k}: {v}\r\n" for k, v in declared.items())
        with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT) as sock:
            sock.sendall(f"POST /v1/tables HTTP/1.1\r\nHost: {host}\r\n{head}\r\n".encode())
            too_large = sock.recv(65536)
        assert too_large.startswith(b"HTTP/1.1 413 "), too_large[:200]


def test_every_v1_route_declares_who_may_call_it(factory: sessionmaker[Session]) -> None:
    """A route added without `require(role)` or the job token would be open to anyone."""
    app = create_app(make_settings(), factory)
    paths = {route.path for route in _api_routes(app)}
    assert "/v1/tables" in paths and "/v1/jobs/attempts/{attempt_id}/result" in paths
    open_routes = []
    for route in _api_routes(app):
        guard = route_guard(route)
        if route.path.startswith(TIMELINE_SERVER_PREFIXES):
            open_routes.append(route.path)
            continue
        assert guard.role is not None or guard.job, route.path
    # Hudi's timeline server protocol: its Java client sends no token (README); those routes
    # answer registered tables only, and only while `timeline_server_enabled` is on.
    assert any(path.startswith("/v1/hoodie/view/") for path in open_routes)
    assert any(path.startswith("/v1/hoodie/marker/") for path in open_routes)


TIMELINE_SERVER_PREFIXES = ("/v1/hoodie/view/", "/v1/hoodie/marker/")


def _api_routes(app: Any) -> list[APIRoute]:
    found: list[APIRoute] = []
    pending = list(app.router.routes)
    while pending:
        route = pending.pop()
        if isinstance(route, APIRoute) and route.path.startswith("/v1/"):
            found.append(route)
        pending += getattr(getattr(route, "original_router", None), "routes", [])
    return found


def test_refusals_are_counted_under_the_route(factory: sessionmaker[Session]) -> None:
    app = create_app(make_settings(auth_tokens=AUTH_TOKENS), factory)
    assert _post(app, "/v1/tables", b"{}").status_code == 401
    assert _post(app, CALLBACK_URL, b"{}").status_code == 401

    async def metrics() -> str:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tms") as http:
            return (await http.get("/metrics")).text

    text = asyncio.run(metrics())
    assert 'method="POST",route="/v1/tables",status="401"' in text
    assert f'method="POST",route="{CALLBACK_URL}",status="401"' in text
