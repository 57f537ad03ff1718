"""Requests that uvicorn's HTTP parser refuses before the app sees them, sent raw over a
socket to a real `tms serve`: the answer is still the API's JSON error, as the README's
table of errors says (a bad `Content-Length` names `header.content-length`)."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from tests.fuzz.conftest import TOKENS, FuzzServer

pytestmark = pytest.mark.fuzz


def _exchange(server: FuzzServer, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `raw` and read the answer until the server closes the connection."""
    address = urlsplit(server.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(raw)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def _post(content_lengths: list[bytes]) -> bytes:
    lines = [
        b"POST /v1/tables HTTP/1.1",
        b"Host: tms",
        b"Authorization: Bearer " + TOKENS["admin"].encode(),
        b"Content-Type: application/json",
        *(b"Content-Length: " + value for value in content_lengths),
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n{}"


@pytest.mark.parametrize(
    "content_lengths",
    [[b"abc"], [b"12a"], [b"-1"], [b"1e3"], [b"99999999999999999999999"], [b"2", b"3"]],
    ids=["letters", "trailing-letter", "negative", "exponent", "overflow", "two-values"],
)
def test_a_malformed_content_length_gets_the_json_error_naming_the_header(
    fuzz_server: FuzzServer, content_lengths: list[bytes]
) -> None:
    status, headers, body = _exchange(fuzz_server, _post(content_lengths))
    assert status == 400
    assert headers["content-type"] == "application/json", body
    assert headers["connection"] == "close"
    error = json.loads(body)["error"]
    assert (error["code"], error["field"]) == ("bad_request", "header.content-length")
    assert error["message"].startswith("Content-Length is not one number")
    # the server goes on serving
    assert httpx.get(f"{fuzz_server.url}/healthz").json() == {"status": "ok"}


def test_a_request_that_is_not_http_gets_the_json_error(fuzz_server: FuzzServer) -> None:
    status, headers, body = _exchange(fuzz_server, b"GARBAGE\r\n\r\n")
    assert status == 400 and headers["content-type"] == "application/json", body
    assert json.loads(body) == {
        "error": {
            "code": "bad_request",
            "message": "the request is not valid HTTP/1.1",
            "field": None,
        }
    }


def _get(*header_lines: bytes) -> bytes:
    lines = [
        b"GET /v1/alerts HTTP/1.1",
        b"Host: tms",
        b"Authorization: Bearer " + TOKENS["viewer"].encode(),
        *header_lines,
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n"


@pytest.mark.parametrize(
    "header_lines",
    [[b"Transfer-Encoding: lzk"], [b"Q;"]],
    ids=["unknown-transfer-encoding", "no-colon"],
)
def test_a_malformed_header_gets_the_documented_json_error(
    fuzz_server: FuzzServer, header_lines: list[bytes]
) -> None:
    status, headers, body = _exchange(fuzz_server, _get(*header_lines))
    assert status == 400 and headers["content-type"] == "application/json", body
    assert json.loads(body)["error"]["code"] == "bad_request"
    document = httpx.get(f"{fuzz_server.url}/openapi.json").json()
    documented = document["paths"]["/v1/alerts"]["get"]["responses"]
    assert "400" in documented and "not well-formed HTTP" in documented["400"]["description"]
    assert httpx.get(f"{fuzz_server.url}/healthz").json() == {"status": "ok"}
