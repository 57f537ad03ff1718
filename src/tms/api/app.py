"""Assembles the FastAPI application; no behaviour lives here."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from tms.api.errors import install_error_handlers
from tms.api.http_metrics import HttpMetricsMiddleware
from tms.api.routes import callback, health, hoodie, jobs, operations, tables
from tms.config import Settings

__all__ = ["create_app"]

log = logging.getLogger(__name__)

DESCRIPTION = """Table management service for Apache Hudi.

Errors are `{"error": {"code", "message", "field"}}`; bad input is 422 naming the field.
Bearer tokens (`TMS_AUTH_TOKENS`): viewers read, writers also notify and submit, admins
also change and delete tables. The commit callback takes Hudi's `HUDI-CALLBACK-KEY`.
"""


def create_app(
    settings: Settings,
    session_factory: sessionmaker[Session],
    *,
    lifespan: Any = None,
) -> FastAPI:
    """The API over `session_factory`'s database; `lifespan` lets `tms serve` run the
    scheduler alongside (tests pass none)."""
    if not settings.auth_enabled:
        log.warning(
            "TMS_AUTH_TOKENS is not set: API authentication is OFF; anyone who can reach "
            "this port may register tables and submit operations"
        )
    app = FastAPI(title="tms", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.session_factory = session_factory
    install_error_handlers(app)
    app.add_middleware(HttpMetricsMiddleware)
    for module in (callback, hoodie, tables, operations, jobs, health):
        app.include_router(module.router)
    return app
