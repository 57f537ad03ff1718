"""Who may call what: bearer tokens with roles, Hudi's callback keys, and job tokens.

Roles nest: an admin may do everything a writer may, a writer everything a viewer may
(a writer's CLI can read what it submitted). With no tokens configured auth is off and
every caller acts as admin. Job endpoints never accept role tokens: only the token issued
to that attempt (see `deps.job_attempt`).

Callback keys (`TMS_CALLBACK_KEYS`) admit the commit callback only, each for its base-path
prefixes. Hudi's default key is public knowledge, so with auth on it is accepted only when
the setting names it.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from tms.api.errors import ApiError
from tms.base_path import within
from tms.config import DEFAULT_CALLBACK_KEY, CallbackKey, Role, Settings

__all__ = [
    "ROLE_RANK",
    "CallbackGrant",
    "authorize",
    "authorize_callback",
    "bearer_token",
    "log_callback_keys",
    "unauthorized",
]

log = logging.getLogger(__name__)

ROLE_RANK = {Role.VIEWER: 0, Role.WRITER: 1, Role.ADMIN: 2}
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers=_CHALLENGE)


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, if there is one."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


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


@dataclass(frozen=True)
class CallbackGrant:
    """What an authenticated commit callback may notify: base paths under `prefixes`, or
    any base path when there are none (an unscoped key, a writer token)."""

    prefixes: tuple[str, ...] = ()

    def check(self, base_path: str, field: str, *, named: str | None = None) -> None:
        """403 naming `field` when `base_path` is outside every prefix. A local `base_path`
        comes with its symlinks followed, and is compared with the prefixes followed too
        (this reads the file system); the refusal names the path as `named`, the caller's
        spelling, never where it leads."""
        if self.prefixes and not any(
            within(base_path, p, follow_links=True) for p in self.prefixes
        ):
            raise ApiError(
                403,
                "forbidden",
                f"this HUDI-CALLBACK-KEY may not notify commits of {named or base_path}",
                field=field,
            )


def _matching_key(settings: Settings, given: str | None) -> CallbackKey | None:
    """The accepted key equal to `given`, comparing every key in constant time."""
    if not given:
        return None
    found: CallbackKey | None = None
    for accepted in settings.accepted_callback_keys:
        if hmac.compare_digest(accepted.key.get_secret_value().encode(), given.encode()):
            found = accepted
    return found


def authorize_callback(settings: Settings, headers: Mapping[str, str]) -> CallbackGrant:
    """Hudi's HUDI-CALLBACK-KEY, or with auth on a writer (or admin) bearer token, so our
    own tools can notify without knowing the writers' key. 401 otherwise."""
    key = _matching_key(settings, headers.get("hudi-callback-key"))
    if key is not None:
        return CallbackGrant(key.prefixes)
    token = bearer_token(headers)
    if settings.auth_enabled and token:
        authorize(settings, token, Role.WRITER)
        return CallbackGrant()
    if settings.auth_enabled and headers.get("hudi-callback-key") == DEFAULT_CALLBACK_KEY:
        raise unauthorized(
            "Hudi's default HUDI-CALLBACK-KEY is not accepted while auth is on; "
            "use a key from TMS_CALLBACK_KEYS"
        )
    raise unauthorized("missing or wrong HUDI-CALLBACK-KEY header")


def log_callback_keys(settings: Settings) -> None:
    """Say at start which keys are accepted and for which prefixes: a fingerprint of each
    secret (never the secret; Hudi's public default key by name)."""
    keys = settings.accepted_callback_keys
    if not keys:
        log.warning(
            "no HUDI-CALLBACK-KEY is accepted (auth is on and TMS_CALLBACK_KEYS is empty): "
            "commit callbacks need a writer token"
        )
    for key in keys:
        name = (
            f"Hudi's public default key {DEFAULT_CALLBACK_KEY}"
            if key.is_public_default
            else f"the key with sha256 {key.fingerprint}…"
        )
        scope = ", ".join(key.prefixes) if key.prefixes else "any base path"
        log.info("HUDI-CALLBACK-KEY: %s is accepted for %s", name, scope)
