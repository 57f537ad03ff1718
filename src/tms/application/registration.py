"""Registering a table: the one row per table, with what storage shows of it.

Every caller (the operator's and RFC-43's register, the table-service-manager client's
calls, the commit callback's auto-registration) checks and locates the base path and reads
storage first, outside the transaction; this runs inside it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session

from tms.application.refusals import Refused
from tms.config import Settings
from tms.store import Registered, ServiceAction, TableType, register_table, update_table

__all__ = [
    "DEFAULT_DB_NAME",
    "AutoRegistrationOff",
    "StorageShows",
    "TableRegistration",
    "check_auto_register",
    "register",
    "writer_table_names",
]

DEFAULT_DB_NAME = "default"
"""Database name of a table whose writer names none (Hudi's own default)."""


class AutoRegistrationOff(Refused):
    """A writer named a table that is not registered, and auto-registration is off."""


class StorageShows(Protocol):
    """What storage shows of a table (`hoodie.properties`), as far as registering uses it."""

    @property
    def table_type(self) -> TableType | None: ...

    @property
    def table_version(self) -> int | None: ...

    @property
    def table_name(self) -> str: ...

    @property
    def database_name(self) -> str: ...


def check_auto_register(settings: Settings, name: str) -> None:
    """A writer (its commit callback, its table-service-manager client's `REQUEST`) named
    the unregistered table `name`: `AutoRegistrationOff` unless the settings allow
    registering it."""
    if not settings.auto_register:
        raise AutoRegistrationOff(f"no table is registered at {name} and auto-registration is off")


def writer_table_names(
    base_path: str,
    info: StorageShows | None,
    *,
    db_name: str | None = None,
    table_name: str | None = None,
) -> tuple[str, str]:
    """The database and table names a writer's table is registered under: the writer's,
    else those its `hoodie.properties` shows, else Hudi's default database and the base
    path's last folder."""
    shown_db = info.database_name if info is not None else ""
    shown_table = info.table_name if info is not None else ""
    return (
        db_name or shown_db or DEFAULT_DB_NAME,
        table_name or shown_table or posixpath.basename(base_path.rstrip("/")),
    )


@dataclass(frozen=True)
class TableRegistration:
    """A table to register: where (a checked and located base path, `tms.ingest.registration`)
    and under which names, what storage shows of it, and what the registrant chose."""

    db_name: str
    table_name: str
    base_path: str
    info: StorageShows | None = None
    owner: str | None = None
    queue: str | None = None
    priority: int | None = None
    table_type: TableType | None = None
    enabled_actions: Sequence[ServiceAction] | None = None
    policy: dict[str, Any] | None = None
    paused: bool | None = None
    storage_options: dict[str, Any] | None = None


def register(session: Session, registration: TableRegistration) -> Registered:
    """Register (idempotently) with the table type and version read from storage when it
    is readable; an existing table gets them refreshed if storage shows something new."""
    r, info = registration, registration.info
    registered = register_table(
        session,
        db_name=r.db_name,
        table_name=r.table_name,
        base_path=r.base_path,
        owner=r.owner,
        queue=r.queue,
        priority=r.priority,
        table_type=r.table_type or (info.table_type if info else None),
        table_version=info.table_version if info else None,
        enabled_actions=r.enabled_actions,
        policy=r.policy,
        storage_options=r.storage_options,
    )
    table = registered.table
    changes: dict[str, Any] = {}
    if registered.created and r.paused:
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
