"""The request gate: authenticate from headers and bound the body before anything reads it.

FastAPI reads and parses a body before it solves the route's dependencies, so a dependency
refuses a caller only after the body is in memory. This ASGI middleware runs before that:

1. a `Content-Length` over the limit gets 413 at once;
2. the caller is authenticated from headers alone, when the app asks for the first body
   message (routing has picked the route by then, nothing of the body is read yet): the
   bearer token against the role the route declares (`deps.require`), the attempt's job
   token on job routes (`deps.job_attempt`), the callback key on the commit callback (up
   front: its route is fixed); 401/403 otherwise;
3. the body is counted as it is received (chunked bodies have no length) and the request
   fails with 413 once it passes the limit.

A refusal raised from `receive` is an HTTP exception, which FastAPI lets pass while it
reads a body; whatever the app then answers, the gate sends the refusal in the API's error
format instead. Routes that read no body are checked by their dependencies alone.

Routes declare their role once, with their dependencies; the gate reads it from the route
(`route_guard`), and the dependencies check it again where FastAPI solves them. Limits:
`TMS_MAX_CALLBACK_BYTES` for the commit callback, `TMS_MAX_REQUEST_BYTES` for the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from fastapi.dependencies.models import Dependant
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tms.api.auth import ROLE_RANK, authorize, authorize_callback, bearer_token, unauthorized
from tms.api.deps import RoleCheck, job_attempt, verified_attempt
from tms.api.errors import ApiError, error_response
from tms.config import Role, Settings

__all__ = ["CALLBACK_GUARD", "PUBLIC_GUARD", "Guard", "RequestGate", "route_guard"]


@dataclass(frozen=True)
class Guard:
    """Who may call a route: a bearer token of at least `role`, the attempt's job token
    (`job`), or Hudi's callback key (`callback`); none of them: anyone."""

    role: Role | None = None
    job: bool = False
    callback: bool = False


PUBLIC_GUARD = Guard()
CALLBACK_GUARD = Guard(callback=True)


class _Refused(StarletteHTTPException):
    """Raised from `receive` to stop the app reading; the gate answers with `reason`."""

    def __init__(self, reason: ApiError | Exception) -> None:
        status = reason.status_code if isinstance(reason, ApiError) else 500
        super().__init__(status, str(reason))


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        "payload_too_large",
        f"the request body is over the {limit} bytes this endpoint takes",
        field="body",
    )


def _dependencies(dependant: Dependant) -> Iterator[Dependant]:
    for sub in dependant.dependencies:
        yield sub
        yield from _dependencies(sub)


def route_guard(route: BaseRoute) -> Guard:
    """The guard a FastAPI route declares through its dependencies."""
    dependant = getattr(route, "dependant", None)
    if not isinstance(dependant, Dependant):
        return PUBLIC_GUARD
    role: Role | None = None
    job = False
    for dependency in _dependencies(dependant):
        if isinstance(dependency.call, RoleCheck):
            needed = dependency.call.role
            role = needed if role is None else max(role, needed, key=ROLE_RANK.__getitem__)
        elif dependency.call is job_attempt:
            job = True
    return Guard(role=role, job=job)


class RequestGate:
    """ASGI middleware. `guard` fixes the guard of a single endpoint's `methods` (the commit
    callback, checked up front); otherwise the guard is the matched route's."""

    def __init__(
        self, app: ASGIApp, guard: Guard | None = None, methods: frozenset[str] = frozenset()
    ) -> None:
        self.app = app
        self.guard = guard
        self.methods = methods

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        settings: Settings = request.app.state.settings
        # Other methods of a fixed endpoint are answered 405 without the body.
        fixed = self.guard if scope["method"] in self.methods else None
        callback = fixed is not None and fixed.callback
        limit = settings.max_callback_bytes if callback else settings.max_request_bytes
        try:
            _check_content_length(request, limit)
            if fixed is not None:
                await _authenticate(request, fixed, settings)
        except Exception as exc:
            await (await error_response(request, exc))(scope, receive, send)
            return
        call = _GatedCall(self.app, request, settings, limit, checked=fixed is not None)
        await call(scope, receive, send)


def _check_content_length(request: Request, limit: int) -> None:
    declared = request.headers.get("content-length")
    if declared is None:
        return
    if not (declared.strip().isascii() and declared.strip().isdigit()):
        raise ApiError(
            400, "bad_request", "Content-Length is not a number", field="header.content-length"
        )
    if int(declared) > limit:
        raise _too_large(limit)


async def _authenticate(request: Request, guard: Guard, settings: Settings) -> None:
    if guard.callback:
        authorize_callback(settings, request.headers)
    elif guard.job:
        token = bearer_token(request.headers)
        if token is None:
            raise unauthorized("the attempt's job token is required (Authorization: Bearer …)")
        factory: sessionmaker[Session] = request.app.state.session_factory
        attempt_id = str(request.path_params.get("attempt_id", ""))
        await asyncio.to_thread(_check_job_token, factory, token, attempt_id)
    elif guard.role is not None:
        authorize(settings, bearer_token(request.headers), guard.role)


def _check_job_token(factory: sessionmaker[Session], token: str, attempt_id: str) -> None:
    with factory() as session:
        verified_attempt(session, token, attempt_id)


class _GatedCall:
    """One request through the app with a gated `receive`: the first body message waits
    for the caller's authentication, every message is counted against the limit. Once a
    refusal is decided, the app's response is replaced by the refusal's."""

    def __init__(
        self, app: ASGIApp, request: Request, settings: Settings, limit: int, *, checked: bool
    ) -> None:
        self.app = app
        self.request = request
        self.settings = settings
        self.limit = limit
        self.checked = checked
        self.received = 0
        self.refusal: Exception | None = None
        self.started = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def gated_receive() -> Message:
            if self.refusal is not None:
                raise _Refused(self.refusal)
            if not self.checked:
                self.checked = True
                route = scope.get("route")  # the router has set it by now
                guard = route_guard(route) if route is not None else PUBLIC_GUARD
                try:
                    await _authenticate(self.request, guard, self.settings)
                except Exception as exc:
                    self.refusal = exc
                    raise _Refused(exc) from None
            message = await receive()
            if message["type"] == "http.request":
                self.received += len(message.get("body", b""))
                if self.received > self.limit:
                    self.refusal = _too_large(self.limit)
                    raise _Refused(self.refusal)
            return message

        async def gated_send(message: Message) -> None:
            if self.refusal is not None:
                await self._refuse(scope, receive, send)
                return
            if message["type"] == "http.response.start":
                self.started = True
            await send(message)

        with contextlib.suppress(_Refused):  # the app let it through: answered below
            await self.app(scope, gated_receive, gated_send)
        await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the refusal, once, unless a response started before it was decided."""
        if self.refusal is None or self.started:
            return
        self.started = True
        response = await error_response(self.request, self.refusal)
        await response(scope, receive, send)
