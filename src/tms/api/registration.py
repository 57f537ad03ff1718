"""Registering tables from what callers say and what storage shows.

Used by `POST /v1/tables`, RFC-43 register, the Hudi client's REGISTER/REQUEST and the
commit callback's auto-registration, so all four treat a table alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Response
from sqlalchemy.orm import Session

from tms.api.probe import TableProbe
from tms.api.schemas.tables import TableIn, TableOut
from tms.api.views import table_out
from tms.config import Settings
from tms.store.models import Action, TableType
from tms.store.tables import Registered, register_table, update_table

__all__ = ["DEFAULT_DB_NAME", "register", "register_body"]

DEFAULT_DB_NAME = "default"
"""Database name of a table whose writer names none (Hudi's own default)."""


def register(
    session: Session,
    *,
    db_name: str,
    table_name: str,
    base_path: str,
    probe: TableProbe | None = None,
    owner: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    table_type: TableType | None = None,
    enabled_actions: Sequence[Action] | None = None,
    policy: dict[str, Any] | None = None,
    paused: bool | None = None,
) -> Registered:
    """Register (idempotently) with the table type and version read from storage when it
    is readable; an existing table gets them refreshed if storage shows something new."""
    info = probe.info() if probe is not None else None
    registered = register_table(
        session,
        db_name=db_name,
        table_name=table_name,
        base_path=base_path,
        owner=owner,
        queue=queue,
        priority=priority,
        table_type=table_type or (info.table_type if info else None),
        table_version=info.table_version if info else None,
        enabled_actions=enabled_actions,
        policy=policy,
    )
    table = registered.table
    changes: dict[str, Any] = {}
    if registered.created and paused:
        changes["paused"] = True
    if info is not None and not registered.created:
        if info.table_type is not None and info.table_type != table.table_type:
            changes["table_type"] = info.table_type
        if info.table_version is not None and info.table_version != table.table_version:
            changes["table_version"] = info.table_version
    if changes:
        table = update_table(session, table.id, **changes)
        return Registered(table, registered.created)
    return registered


def register_body(
    session: Session, body: TableIn, response: Response, settings: Settings
) -> TableOut:
    """`POST /v1/tables` and RFC-43 register, which answer alike: storage is read before the
    transaction; 201 when created, 200 when this name and base path were registered already."""
    probe = TableProbe(body.base_path)
    probe.info()
    registered = register(
        session,
        db_name=body.db_name,
        table_name=body.table_name,
        base_path=body.base_path,
        probe=probe,
        owner=body.owner,
        queue=body.queue,
        priority=body.priority,
        table_type=body.table_type,
        enabled_actions=list(dict.fromkeys(body.enabled_actions))
        if body.enabled_actions is not None
        else None,
        policy=body.policy.model_dump(exclude_none=True) if body.policy else None,
        paused=body.paused,
    )
    session.commit()
    response.status_code = 201 if registered.created else 200
    return table_out(registered.table, settings, created=registered.created)
