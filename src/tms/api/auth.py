"""Who may call what: bearer tokens with roles, Hudi's callback key, and job tokens.

Roles nest: an admin may do everything a writer may, a writer everything a viewer may
(a writer's CLI can read what it submitted). With no tokens configured auth is off and
every caller acts as admin. Job endpoints never accept role tokens: only the token issued
to that attempt (see `deps.job_attempt`).
"""

from __future__ import annotations

import hmac

from tms.api.errors import ApiError
from tms.config import Role, Settings

__all__ = ["ROLE_RANK", "authorize", "callback_key_ok", "unauthorized"]

ROLE_RANK = {Role.VIEWER: 0, Role.WRITER: 1, Role.ADMIN: 2}
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers=_CHALLENGE)


def authorize(settings: Settings, token: str | None, needed: Role) -> Role:
    """The caller's role, if it is at least `needed`: 401 without a known token, 403 when
    the token's role is too low."""
    if not settings.auth_enabled:
        return Role.ADMIN
    if not token:
        raise unauthorized("a bearer token is required (Authorization: Bearer <token>)")
    role = settings.role_for_token(token)
    if role is None:
        raise unauthorized("unknown bearer token")
    if ROLE_RANK[role] < ROLE_RANK[needed]:
        raise ApiError(403, "forbidden", f"the {role} role may not do this; it needs {needed}")
    return role


def callback_key_ok(settings: Settings, key: str | None) -> bool:
    """Compare Hudi's HUDI-CALLBACK-KEY with every configured key in constant time."""
    if not key:
        return False
    given = key.encode()
    found = False
    for accepted in settings.callback_keys:
        found |= hmac.compare_digest(accepted.encode(), given)
    return found
