"""Registered tables: idempotent registration, lookups, operator changes, counters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, bindparam, delete, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from tms.base_path import BasePathError, resolve_base_path
from tms.base_path import normalize_base_path as _normalize
from tms.store.claiming import lock_scheduling
from tms.store.errors import NotFound, TableBusy, TableConflict
from tms.store.models import (
    Alert,
    Attempt,
    Commit,
    Operation,
    OperationEvent,
    OperationStatus,
    ServiceAction,
    TableMeasurement,
    TableType,
    Tbl,
)

__all__ = [
    "Registered",
    "delete_table",
    "find_table",
    "find_table_by_base_path",
    "get_table",
    "list_tables",
    "normalize_base_path",
    "register_table",
    "reset_counter",
    "tables_by_id",
    "update_table",
]

# Which counter a scheduled (or finished) operation of each action starts again from zero.
_RESET: dict[ServiceAction, dict[Any, Any]] = {
    ServiceAction.COMPACTION: {
        Tbl.delta_commits_since_compaction: 0,
        Tbl.delta_commits_since_log_compaction: 0,  # a compaction leaves no log blocks
        Tbl.log_bytes_since_compaction: 0,
        Tbl.log_files_since_compaction: 0,
        Tbl.last_compaction_at: func.now(),
    },
    ServiceAction.CLEAN: {Tbl.commits_since_clean: 0, Tbl.last_clean_at: func.now()},
    ServiceAction.CLUSTERING: {
        Tbl.commits_since_clustering: 0,
        Tbl.small_files_since_clustering: {},
        Tbl.last_clustering_at: func.now(),
    },
    ServiceAction.METADATA_COMPACTION: {Tbl.commits_since_metadata_compaction: 0},
    ServiceAction.LOG_COMPACTION: {Tbl.delta_commits_since_log_compaction: 0},
    ServiceAction.ARCHIVAL: {Tbl.commits_since_archival: 0},
    ServiceAction.PARTITION_TTL: {Tbl.last_partition_ttl_at: func.now()},
}
"""What restarts when an action is scheduled: its counters, and the clock of its last run."""
_UPDATABLE = frozenset(
    {
        "owner",
        "queue",
        "priority",
        "enabled_actions",
        "policy",
        "paused",
        "table_type",
        "table_version",
        "storage_options",
    }
)


@dataclass(frozen=True)
class Registered:
    table: Tbl
    created: bool


def normalize_base_path(base_path: str) -> str:
    """One spelling per location (`tms.base_path`), so `/x//y/`, `file:///x/y` and
    `/x/z/../y` are the same table. What names no location (a relative path, a chained
    URL) is kept as given: the API refuses it, and lookups of it find nothing."""
    try:
        return _normalize(base_path)
    except BasePathError:
        return base_path.strip()


def register_table(
    session: Session,
    *,
    db_name: str,
    table_name: str,
    base_path: str,
    owner: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    table_type: TableType | None = None,
    table_version: int | None = None,
    enabled_actions: Sequence[ServiceAction] | None = None,
    policy: dict[str, Any] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> Registered:
    """Register a table, or return it unchanged if this exact name and base path exist
    (its storage options too: an admin changes them with `update_table`).

    Raises `TableConflict` when the name is registered at another base path or the base
    path under another name. Concurrent identical calls both succeed with one row.
    """
    base_path = normalize_base_path(base_path)
    values: dict[str, Any] = {
        "db_name": db_name,
        "table_name": table_name,
        "base_path": base_path,
        "owner": owner,
        "queue": queue,
        "priority": priority,
        "table_type": table_type,
        "table_version": table_version,
        "enabled_actions": list(enabled_actions) if enabled_actions is not None else None,
        "policy": policy,
        "storage_options": storage_options,
    }
    stmt = (
        insert(Tbl)
        .values({k: v for k, v in values.items() if v is not None})
        .on_conflict_do_nothing()
        .returning(Tbl)
    )
    created = session.scalars(stmt).one_or_none()
    if created is not None:
        return Registered(created, True)

    existing = session.scalars(
        select(Tbl).where(
            or_(
                (Tbl.db_name == db_name) & (Tbl.table_name == table_name),
                Tbl.base_path == base_path,
            )
        )
    ).all()
    for row in existing:
        if (row.db_name, row.table_name, row.base_path) == (db_name, table_name, base_path):
            return Registered(row, False)
    for row in existing:
        if (row.db_name, row.table_name) == (db_name, table_name):
            raise TableConflict(
                f"table {db_name}.{table_name} is registered with base path {row.base_path}, "
                f"not {base_path}"
            )
    for row in existing:
        raise TableConflict(
            f"base path {base_path} is registered as {row.db_name}.{row.table_name}"
        )
    # The conflicting row was deleted between our INSERT and SELECT: try once more.
    return register_table(
        session,
        **{**values, "enabled_actions": enabled_actions, "base_path": base_path},
    )


def get_table(session: Session, tbl_id: int) -> Tbl:
    table = session.get(Tbl, tbl_id)
    if table is None:
        raise NotFound("table", tbl_id)
    return table


def find_table(session: Session, *, db_name: str, table_name: str) -> Tbl | None:
    return session.scalars(
        select(Tbl).where(Tbl.db_name == db_name, Tbl.table_name == table_name)
    ).one_or_none()


# Built once: the lookup every commit notification makes (base_path is unique).
_BY_BASE_PATH = select(Tbl).where(Tbl.base_path == bindparam("p_base_path", type_=String))


def find_table_by_base_path(session: Session, base_path: str) -> Tbl | None:
    """The table registered at `base_path`. Tables are stored with the symlinks of local
    paths followed, so a local spelling no table has is looked up once more with its
    symlinks followed (this reads the file system: call it where storage may be waited on)."""
    spelled = normalize_base_path(base_path)
    found = session.scalars(_BY_BASE_PATH, {"p_base_path": spelled}).one_or_none()
    if found is not None:
        return found
    try:
        resolved = resolve_base_path(spelled)
    except BasePathError:
        return None
    if resolved == spelled:
        return None
    return session.scalars(_BY_BASE_PATH, {"p_base_path": resolved}).one_or_none()


def tables_by_id(session: Session, ids: Iterable[int]) -> dict[int, Tbl]:
    """The tables `ids` (one query), by id; ids of deleted tables are left out."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    return {t.id: t for t in session.scalars(select(Tbl).where(Tbl.id.in_(wanted)))}


def list_tables(
    session: Session,
    *,
    limit: int = 100,
    after_id: int | None = None,
    db_name: str | None = None,
    paused: bool | None = None,
) -> list[Tbl]:
    """Tables in id order; pass the last id seen as `after_id` for the next page."""
    stmt = select(Tbl).order_by(Tbl.id).limit(limit)
    if after_id is not None:
        stmt = stmt.where(Tbl.id > after_id)
    if db_name is not None:
        stmt = stmt.where(Tbl.db_name == db_name)
    if paused is not None:
        stmt = stmt.where(Tbl.paused.is_(paused))
    return list(session.scalars(stmt))


def update_table(session: Session, tbl_id: int, **changes: Any) -> Tbl:
    """Change operator-settable fields (owner, queue, priority, enabled_actions, policy,
    paused, table_type, table_version, storage_options); unknown names are a programming error."""
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise TypeError(f"not updatable: {', '.join(sorted(unknown))}")
    if "enabled_actions" in changes:
        changes["enabled_actions"] = list(changes["enabled_actions"])
    stmt = (
        update(Tbl)
        .where(Tbl.id == tbl_id)
        .values(**changes, updated_at=func.now())
        .returning(Tbl)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    table = session.scalars(stmt).one_or_none()
    if table is None:
        raise NotFound("table", tbl_id)
    return table


def reset_counter(session: Session, tbl_id: int, action: ServiceAction) -> None:
    """Restart the counters `action`'s triggers watch, and its clock (when a trigger
    schedules one)."""
    reset = _RESET.get(action)
    if reset is None:
        return
    session.execute(
        update(Tbl).where(Tbl.id == tbl_id).values({**reset, Tbl.updated_at: func.now()})
    )


def delete_table(session: Session, tbl_id: int) -> None:
    """Remove a table and its history with explicit deletes (nothing cascades).

    Refused with `TableBusy` while one of its operations runs. Takes the scheduling lock so
    no claim can start one of its operations meanwhile.
    """
    lock_scheduling(session)
    get_table(session, tbl_id)
    running = session.scalar(
        select(Operation.id).where(
            Operation.tbl_id == tbl_id, Operation.status == OperationStatus.RUNNING
        )
    )
    if running is not None:
        raise TableBusy(f"table {tbl_id} has running operation {running}")
    ops = select(Operation.id).where(Operation.tbl_id == tbl_id).scalar_subquery()
    for stmt in (
        delete(Alert).where(Alert.tbl_id == tbl_id),
        delete(OperationEvent).where(OperationEvent.operation_id.in_(ops)),
        delete(Attempt).where(Attempt.operation_id.in_(ops)),
        delete(Operation).where(Operation.tbl_id == tbl_id),
        delete(Commit).where(Commit.tbl_id == tbl_id),
        delete(TableMeasurement).where(TableMeasurement.tbl_id == tbl_id),
        delete(Tbl).where(Tbl.id == tbl_id),
    ):
        session.execute(stmt.execution_options(synchronize_session=False))
    session.expire_all()
