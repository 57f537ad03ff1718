"""One error format for every failure, and the mapping of lower-layer errors to it.

Every error response is `{"error": {"code", "message", "field"}}` (validation errors add
`errors`, one entry per problem). Status codes:

    401 unauthorized         no or unknown bearer token / callback key
    403 forbidden            the token's role may not do this
    404 not_found            unknown id, table, instant or route
    405 method_not_allowed
    409 conflict …           the request clashes with stored state (table_conflict,
                             table_busy, operation_conflict, transition_refused, lease_lost)
    413 payload_too_large    the body is over the limit
    422 validation_error     the request itself is wrong; `field` names where (a body that
                             is not JSON at all: `body`)
    503 database_unavailable the database does not answer (retry later)
    500 internal_error       a bug; details are logged, never sent

Store errors (`tms.store.errors`) and database data errors are translated here, at the
boundary, so routes raise what they mean and never build error bodies themselves; the
driver's own words go to the log only. `error_responses` documents these statuses in
OpenAPI with the error schema.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from tms.api.schemas.errors import ErrorOut
from tms.http.errors import ApiError, error_body
from tms.store import (
    NotFound,
    OperationConflict,
    StoreError,
    TableBusy,
    TableConflict,
    TransitionRefused,
)

__all__ = [
    "MALFORMED_HTTP",
    "ApiError",
    "Responses",
    "error_body",
    "error_response",
    "error_responses",
    "install_error_handlers",
]

Responses = dict[int | str, dict[str, Any]]
"""OpenAPI `responses=` documentation of a route."""

log = logging.getLogger(__name__)

MALFORMED_HTTP = (
    "the request is not well-formed HTTP/1.1 (a Content-Length that is not one number, a "
    "Transfer-Encoding other than chunked, a header line that is not `name: value`); "
    "answered before the API reads it, and the connection is closed"
)
"""What 400 means on every operation: `tms serve`'s HTTP parser refuses the request."""

_MAX_SHOWN_INPUT = 80
_NOT_JSON = "the body is not valid JSON (UTF-8)"
_DESCRIPTIONS = {
    400: MALFORMED_HTTP,
    401: "no bearer token, or an unknown one",
    403: "the token's role may not do this",
    404: "not found",
    409: "the request clashes with stored state",
    413: "the body is over the size limit",
    422: "the request is wrong (a body that is not JSON too); `field` names where",
    502: "the table's storage could not be read",
    503: "the database is unavailable, every storage thread is busy, or storage kept "
    "failing; retry later",
    504: "the table's storage did not answer in time; retry later",
}
_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    503: "unavailable",
}
_STORE_ERRORS: dict[type[StoreError], tuple[int, str]] = {
    NotFound: (404, "not_found"),
    TableConflict: (409, "table_conflict"),
    TableBusy: (409, "table_busy"),
    OperationConflict: (409, "operation_conflict"),
    TransitionRefused: (409, "transition_refused"),
}


def error_responses(*statuses: int, **descriptions: str) -> Responses:
    """OpenAPI `responses=` for error statuses, each with the error schema; a keyword
    `_404="…"` gives a status its own description."""
    return {
        status: {
            "model": ErrorOut,
            "description": descriptions.get(f"_{status}", _DESCRIPTIONS.get(status, "error")),
        }
        for status in statuses
    }


def table_read_errors(conflict: str) -> Responses:
    """OpenAPI `responses=` of a route that reads a registered table on storage: no table
    (404), `conflict` (409), storage failed or timed out (502, 504)."""
    return error_responses(
        404,
        409,
        502,
        504,
        _404="no table with this id, or none on storage",
        _409=conflict,
    )


def _json(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    return JSONResponse(error_body(code, message, field, **extra), status, headers=headers)


def _field(loc: Sequence[int | str]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def _problem(error: Any) -> dict[str, Any]:
    """One pydantic/FastAPI error as `{field, message, type}`, with short inputs shown; a
    body that is not JSON is blamed on `body` as a whole (not on a character offset)."""
    loc = error.get("loc", ())
    if error.get("type") == "json_invalid":
        detail = (error.get("ctx") or {}).get("error") or error.get("msg", "")
        return {"field": "body", "message": f"{_NOT_JSON}: {detail}", "type": "json_invalid"}
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    given = error.get("input")
    if isinstance(given, str | int | float | bool) and error.get("type") != "missing":
        shown = repr(given)
        if len(shown) <= _MAX_SHOWN_INPUT:
            message = f"{message} (got {shown})"
    return {"field": _field(loc), "message": message, "type": error.get("type", "invalid")}


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [_problem(e) for e in exc.errors()]
    first = problems[0] if problems else {"field": "body", "message": "invalid request"}
    message = f"{first['field']}: {first['message']}"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more)"
    return _json(422, "validation_error", message, first["field"], errors=problems)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return _json(exc.status_code, exc.code, exc.message, exc.field, exc.headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # FastAPI: a body it could not decode (e.g. not UTF-8)
        problem = {"field": "body", "message": _NOT_JSON, "type": "json_invalid"}
        return _json(422, "validation_error", f"body: {_NOT_JSON}", "body", errors=[problem])
    code = _STATUS_CODES.get(exc.status_code, "error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed_methods(request) or headers.get("Allow", "")
        message = f"{request.method} is not allowed here; allowed: {headers['Allow']}"
    return _json(exc.status_code, code, message, headers=headers)


def _allowed_methods(request: Request) -> str:
    """Every method of the path, over all its routes (Starlette names only the methods of
    the first route that matches the path: `GET` for `GET /v1/tables` and `POST
    /v1/tables`)."""
    methods: set[str] = set()
    for route in _routes(request.app.router.routes):
        allowed = getattr(route, "methods", None)
        if allowed and route.matches(request.scope)[0] is not Match.NONE:
            methods |= allowed
    return ", ".join(sorted(methods))


def _routes(routes: Sequence[BaseRoute]) -> Iterable[Any]:
    """The routes of an application, those of included routers too (FastAPI 0.165 keeps
    an included router as one route; `iter_route_contexts` opens it)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # an older FastAPI copies included routes into the application's
        return routes
    return iter_route_contexts(routes)


async def _store_error(request: Request, exc: Exception) -> JSONResponse:
    for kind, (status, code) in _STORE_ERRORS.items():
        if isinstance(exc, kind):
            return _json(status, code, str(exc))
    return _json(409, "conflict", str(exc))


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """Input PostgreSQL refuses (out-of-range numbers, NUL bytes) is the client's fault;
    a database that does not answer is temporary; anything else is a bug."""
    assert isinstance(exc, DBAPIError)
    orig = exc.orig
    if isinstance(orig, psycopg.errors.DataError):
        log.info(
            "the database refused a value on %s %s: %s", request.method, request.url.path, orig
        )
        return _json(422, "validation_error", "a value is out of range or cannot be stored")
    if isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError) or (
        exc.connection_invalidated
    ):
        log.warning("database unavailable: %s", orig)
        return _json(503, "database_unavailable", "the database is unavailable; retry later")
    return await _internal(request, exc)


async def _pool_timeout(request: Request, exc: Exception) -> JSONResponse:
    """No pooled connection became free in time: the database is saturated or hangs."""
    log.warning("database unavailable: %s", exc)
    return _json(503, "database_unavailable", "the database is unavailable; retry later")


async def _internal(request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return _json(500, "internal_error", "internal error; the server log has the details")


_HANDLERS: dict[type[Exception], Callable[[Request, Exception], Awaitable[JSONResponse]]] = {
    RequestValidationError: _validation,
    ApiError: _api_error,
    StarletteHTTPException: _http_error,
    StoreError: _store_error,
    DBAPIError: _database_error,
    PoolTimeout: _pool_timeout,
    Exception: _internal,
}


def install_error_handlers(app: FastAPI) -> None:
    for kind, handler in _HANDLERS.items():
        app.add_exception_handler(kind, handler)


async def error_response(request: Request, exc: Exception) -> JSONResponse:
    """The response the handlers give `exc`, for endpoints outside FastAPI's routing
    (the most specific handler wins, as in Starlette)."""
    for kind in type(exc).__mro__:
        handler = _HANDLERS.get(kind)
        if handler is not None:
            return await handler(request, exc)
    return await _internal(request, exc)
