"""Small builders shared by the store tests."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from itertools import count
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tms.store import (
    Claim,
    CommitIn,
    CountedTable,
    Operation,
    ServiceAction,
    Tbl,
    claim_due_operations,
    record_commits,
    register_table,
    submit_operation,
)

_instants = count(1)


def instant() -> str:
    """A fresh 17-digit Hudi instant time."""
    return f"20250101{next(_instants):09d}"


def make_table(session: Session, name: str = "t", **kwargs: Any) -> Tbl:
    return register_table(
        session, db_name="db", table_name=name, base_path=f"/data/{name}", **kwargs
    ).table


def record(
    session: Session, table_id: int, instant: str, action: str, **sizes: int
) -> CountedTable | None:
    """Store one commit; the table with its new counters, or None if it was stored before."""
    recorded = record_commits(session, [CommitIn(table_id, instant, action, **sizes)])
    return recorded.tables.get(table_id) if recorded.new[0] else None


def make_op(
    session: Session,
    table: Tbl,
    action: ServiceAction = ServiceAction.COMPACTION,
    *,
    at: str | None = "new",
    **kwargs: Any,
) -> Operation:
    return submit_operation(
        session,
        tbl_id=table.id,
        action=action,
        instant=instant() if at == "new" else at,
        **kwargs,
    ).operation


def claim(
    session: Session,
    limit: int = 10,
    *,
    instance: str = "i1",
    queue_limits: Mapping[str, int] | None = None,
    lease_seconds: float = 60,
    now: datetime | None = None,
) -> list[Claim]:
    return claim_due_operations(
        session,
        instance,
        limit=limit,
        queue_limits=queue_limits,
        lease_seconds=lease_seconds,
        now=now,
    )


def db_now(session: Session) -> datetime:
    """The database clock (transaction start), which the store uses for every time."""
    return session.execute(select(func.now())).scalar_one()
