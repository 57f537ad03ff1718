"""`GET /v1/auth/whoami`: the role of the caller's token, so a client (the operator console)
offers only what the role may do; the server checks every call anyway."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from tms.api.deps import SettingsDep, require
from tms.api.errors import error_responses
from tms.api.schemas.overview import WhoAmIOut
from tms.config import Role

router = APIRouter(prefix="/v1/auth", tags=["auth"], responses=error_responses(401, 403, 422, 503))


@router.get("/whoami", response_model=WhoAmIOut)
def whoami_route(settings: SettingsDep, role: Annotated[Role, require(Role.VIEWER)]) -> WhoAmIOut:
    """401 for a missing or unknown token; otherwise its role (admin when auth is off)."""
    return WhoAmIOut(role=role, auth_enabled=settings.auth_enabled)
