"""Service instances: registered at start, heartbeat by the scheduler loop, for observability.

Nothing references an instance by foreign key (leases and attempts name it as text), so
stale rows can be pruned without touching history.
"""

from __future__ import annotations

import os
import secrets
import socket
from datetime import timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from tms.store.models import Instance

__all__ = [
    "heartbeat_instance",
    "list_instances",
    "new_instance_id",
    "prune_instances",
    "register_instance",
]


def new_instance_id() -> str:
    """`host-pid-random`: readable in leases and logs, unique across restarts."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def register_instance(
    session: Session, instance_id: str, *, host: str | None = None, pid: int | None = None
) -> Instance:
    """Insert this instance, or refresh it if the id is known (idempotent)."""
    stmt = (
        insert(Instance)
        .values(id=instance_id, host=host or socket.gethostname(), pid=pid or os.getpid())
        .on_conflict_do_update(index_elements=[Instance.id], set_={"heartbeat_at": func.now()})
        .returning(Instance)
        .execution_options(populate_existing=True)
    )
    return session.scalars(stmt).one()


def heartbeat_instance(session: Session, instance_id: str) -> bool:
    """Mark the instance alive; False if its row is gone (pruned): register it again."""
    stmt = (
        update(Instance)
        .where(Instance.id == instance_id)
        .values(heartbeat_at=func.now())
        .returning(Instance.id)
        .execution_options(synchronize_session=False)
    )
    return session.execute(stmt).one_or_none() is not None


def list_instances(session: Session, *, alive_within: timedelta | None = None) -> list[Instance]:
    """All known instances, or only those that beat within `alive_within`, oldest first."""
    stmt = select(Instance).order_by(Instance.started_at, Instance.id)
    if alive_within is not None:
        stmt = stmt.where(Instance.heartbeat_at >= func.now() - alive_within)
    return list(session.scalars(stmt))


def prune_instances(session: Session, *, silent_for: timedelta) -> int:
    """Delete instances that have not beaten for `silent_for`; returns how many."""
    stmt = (
        delete(Instance)
        .where(Instance.heartbeat_at < func.now() - silent_for)
        .returning(Instance.id)
        .execution_options(synchronize_session=False)
    )
    return len(session.execute(stmt).all())
