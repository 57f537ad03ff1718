"""Registering a table: the one row per table, with what storage shows of it.

Every caller (the operator's and RFC-43's register, the table-service-manager client's
calls, the commit callback's auto-registration) checks and locates the base path and reads
storage first, outside the transaction; this runs inside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy.orm import Session

from tms.store import Action, Registered, TableType, register_table, update_table

__all__ = ["StorageShows", "register"]


class StorageShows(Protocol):
    """What storage shows of a table (`hoodie.properties`), as far as registering uses it."""

    @property
    def table_type(self) -> TableType | None: ...

    @property
    def table_version(self) -> int | None: ...


def register(
    session: Session,
    *,
    db_name: str,
    table_name: str,
    base_path: str,
    info: StorageShows | None = None,
    owner: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    table_type: TableType | None = None,
    enabled_actions: Sequence[Action] | None = None,
    policy: dict[str, Any] | None = None,
    paused: bool | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Registered:
    """Register (idempotently) with the table type and version read from storage when it
    is readable; an existing table gets them refreshed if storage shows something new.
    `base_path` must be checked and located (`tms.ingest.registration`)."""
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
        storage_options=storage_options,
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
