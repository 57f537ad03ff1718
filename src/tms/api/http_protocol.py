"""The HTTP/1.1 protocol `tms serve` gives uvicorn: uvicorn's own, except that a request its
parser refuses before the app sees it gets the API's JSON error instead of uvicorn's
plain-text "Invalid HTTP request received.".

uvicorn's parsers (httptools, which `uvicorn[standard]` installs and uvicorn picks, and
h11) reject a `Content-Length` that is not one number while parsing the headers, so the
app's own check (`tms.api.gate`) never runs for it: the answer is written here, 400
`bad_request` with `field` `header.content-length`, or without a field for any other
malformed request (request line, header syntax). The connection is closed after it, as
uvicorn does, since the rest of the stream cannot be trusted.
"""

from __future__ import annotations

import json
import sys

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tms.http.errors import error_body

__all__ = ["CONTENT_LENGTH_FIELD", "JsonErrorsHttpToolsProtocol", "refusal_body"]

CONTENT_LENGTH_FIELD = "header.content-length"


def refusal_body(parser_error: BaseException | None) -> bytes:
    """The JSON error for what the parser said (its exception's text names the header)."""
    said = str(parser_error or "").strip()
    if "content-length" in said.lower():
        message = f"Content-Length is not one number ({said})"
        body = error_body("bad_request", message, CONTENT_LENGTH_FIELD)
    else:
        body = error_body("bad_request", "the request is not valid HTTP/1.1")
    return json.dumps(body).encode()


def _write_refusal(protocol: HttpToolsProtocol) -> None:
    """Answer 400 with the JSON error and close. Called by uvicorn inside its `except` for
    the parser's error, which `sys.exc_info` therefore still holds."""
    body = refusal_body(sys.exc_info()[1])
    head = [b"HTTP/1.1 400 Bad Request\r\n"]
    for name, value in protocol.server_state.default_headers:
        head.append(name + b": " + value + b"\r\n")
    head += [
        b"content-type: application/json\r\n",
        b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
        b"connection: close\r\n\r\n",
    ]
    protocol.transport.write(b"".join(head) + body)
    protocol.transport.close()


class JsonErrorsHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing malformed requests in the API's format."""

    def send_400_response(self, msg: str) -> None:
        _write_refusal(self)
