"""Dependencies shared by the routers, as `Annotated` aliases (FastAPI template style).

Sessions come without an open transaction; a route that writes calls `session.commit()`
before it builds its response, so a 2xx always means the rows are committed. Whatever a
route leaves uncommitted (an error, a refused request) is rolled back when the session
closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from tms.api.auth import authorize, unauthorized
from tms.api.schemas.common import MAX_ID
from tms.application import OperationManager, TableAccess
from tms.blocking_calls import BlockingCalls
from tms.config import Role, Settings
from tms.store import Attempt, attempt_for_token

__all__ = [
    "BearerDep",
    "JobAttemptDep",
    "ManagerDep",
    "RoleCheck",
    "SessionDep",
    "SettingsDep",
    "StorageCallsDep",
    "TableAccessDep",
    "job_attempt",
    "require",
    "storage_calls",
    "table_access",
    "verified_attempt",
]


# Dependencies that do no I/O are `async def`, so FastAPI runs them on the event loop
# instead of a threadpool hop each; the routes' database work stays in sync code.


async def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def _session(request: Request) -> AsyncIterator[Session]:
    """A new session (no I/O: it connects on first use, in the sync route's thread).

    Closing one whose transaction is still open rolls back (a round trip), so that is done
    in the threadpool; a session without a transaction (committed, or never used) closes
    without I/O, on the loop.
    """
    factory: sessionmaker[Session] = request.app.state.session_factory
    session = factory()
    try:
        yield session
    finally:
        if session.in_transaction():
            await run_in_threadpool(session.close)
        else:
            session.close()


_bearer = HTTPBearer(
    auto_error=False,
    description="A role token from TMS_AUTH_TOKENS, or on /v1/jobs the attempt's job token.",
)


async def _manager(request: Request) -> OperationManager:
    manager: OperationManager = request.app.state.manager
    return manager


SettingsDep = Annotated[Settings, Depends(_settings)]
ManagerDep = Annotated[OperationManager, Depends(_manager)]
SessionDep = Annotated[Session, Depends(_session)]
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


class RoleCheck:
    """The dependency `require(role)` adds to a route: the one place a route declares its
    role. `tms.api.gate` reads `role` from the route to authenticate before the body is
    read; the check runs again here, where FastAPI solves the route's dependencies."""

    def __init__(self, role: Role) -> None:
        self.role = role

    async def __call__(self, settings: SettingsDep, credentials: BearerDep) -> Role:
        return authorize(settings, credentials.credentials if credentials else None, self.role)


def require(role: Role) -> Any:
    """A route dependency admitting callers whose token grants at least `role`."""
    return Depends(RoleCheck(role))


def verified_attempt(session: Session, token: str | None, attempt_id: int | str) -> Attempt:
    """The attempt `attempt_id`, if `token` is the job token issued to it (else 401)."""
    if not token:
        raise unauthorized("the attempt's job token is required (Authorization: Bearer …)")
    attempt = attempt_for_token(session, token, running_only=False)
    if attempt is None or str(attempt.id) != str(attempt_id):
        raise unauthorized(f"the token is not the job token of attempt {attempt_id}")
    return attempt


def job_attempt(
    attempt_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    credentials: BearerDep,
    session: SessionDep,
) -> Attempt:
    """The attempt in the path, if the bearer token is the one issued to it (else 401).

    Finished attempts are found too, so a repeated result is answered, not refused; each
    route checks whether the attempt still holds the operation's lease (else 409).
    """
    return verified_attempt(session, credentials.credentials if credentials else None, attempt_id)


JobAttemptDep = Annotated[Attempt, Depends(job_attempt)]
"""The attempt a job route acts for; `tms.api.gate` checks its token before the body."""


async def storage_calls(request: Request) -> BlockingCalls:
    """The application's `BlockingCalls` (made by `tms.api.app.create_app`); no I/O, so a
    dependency on the event loop."""
    calls: BlockingCalls = request.app.state.storage_calls
    return calls


StorageCallsDep = Annotated[BlockingCalls, Depends(storage_calls)]
"""The application's `BlockingCalls`, as a route parameter."""


async def table_access(request: Request) -> TableAccess:
    """How a use case reaches a table's storage after its commit: the application's storage
    calls, and its table locks for a table whose writers lock it through the service."""
    calls: BlockingCalls = request.app.state.storage_calls
    return TableAccess(calls.run, calls.timeout, request.app.state.table_locks)


TableAccessDep = Annotated[TableAccess, Depends(table_access)]
"""`TableAccess` over the application's storage calls and table locks, as a route parameter."""
