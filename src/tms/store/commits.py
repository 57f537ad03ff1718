"""Commit notifications: stored once per (table, instant), counted once.

Hudi's callback has no retry and writers may still send duplicates (restarts, our own
clients), so the insert and the counter update are one statement that only counts a commit
it actually inserted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast

import psycopg
from sqlalchemy import (
    BigInteger,
    DateTime,
    Integer,
    String,
    Table,
    bindparam,
    func,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from tms.store.errors import NotFound
from tms.store.models import Commit, Tbl

__all__ = ["DELTA_ACTIONS", "WRITE_ACTIONS", "CommitRecorded", "list_commits", "record_commit"]

# Commits that add data (and so count towards clean and clustering thresholds); delta commits
# also count towards compaction. Table-service and housekeeping actions are stored only.
WRITE_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit"})
DELTA_ACTIONS = frozenset({"deltacommit"})


@dataclass(frozen=True)
class CommitRecorded:
    """`new` is False for a repeated notification; `table` has the (updated) counters."""

    new: bool
    table: Tbl


# Built once (bind parameters only): the insert, and the counter update that only runs when
# the insert stored a row. Core statements returning plain rows, not ORM entities.
_commit = cast(Table, Commit.__table__)
_tbl = cast(Table, Tbl.__table__)
_received_at = func.coalesce(bindparam("p_received_at", type_=DateTime(timezone=True)), func.now())
_inserted = (
    insert(_commit)
    .values(
        tbl_id=bindparam("p_tbl_id", type_=BigInteger),
        instant=bindparam("p_instant", type_=String),
        action=bindparam("p_action", type_=String),
        records=bindparam("p_records", type_=BigInteger),
        bytes=bindparam("p_bytes", type_=BigInteger),
        files=bindparam("p_files", type_=Integer),
        log_files=bindparam("p_log_files", type_=Integer),
        received_at=_received_at,
    )
    .on_conflict_do_nothing(index_elements=[_commit.c.tbl_id, _commit.c.instant])
    .returning(_commit.c.tbl_id)
    .cte("inserted")
)
# The counters and last instant, as the update leaves them (set on the loaded Tbl).
_COUNTER_COLUMNS = (
    "delta_commits_since_compaction",
    "commits_since_clean",
    "commits_since_clustering",
    "last_commit_instant",
    "last_notification_at",
    "updated_at",
)
_RECORD = (
    update(_tbl)
    .where(_tbl.c.id == select(_inserted.c.tbl_id).scalar_subquery())
    .values(
        delta_commits_since_compaction=_tbl.c.delta_commits_since_compaction
        + bindparam("p_delta", type_=Integer),
        commits_since_clean=_tbl.c.commits_since_clean + bindparam("p_write", type_=Integer),
        commits_since_clustering=_tbl.c.commits_since_clustering
        + bindparam("p_write", type_=Integer),
        last_commit_instant=func.greatest(
            _tbl.c.last_commit_instant, bindparam("p_instant", type_=String)
        ),
        last_notification_at=_received_at,
        updated_at=func.now(),
    )
    .returning(*(_tbl.c[name] for name in _COUNTER_COLUMNS))
)


def record_commit(
    session: Session,
    tbl_id: int,
    *,
    instant: str,
    action: str,
    records: int = 0,
    bytes_written: int = 0,
    files: int = 0,
    log_files: int = 0,
    received_at: datetime | None = None,
) -> CommitRecorded:
    """Store one commit (`INSERT … ON CONFLICT DO NOTHING`) and, only if it is new, bump
    the table's counters and last instant in the same statement."""
    params = {
        "p_tbl_id": tbl_id,
        "p_instant": instant,
        "p_action": action,
        "p_records": records,
        "p_bytes": bytes_written,
        "p_files": files,
        "p_log_files": log_files,
        "p_received_at": received_at,
        "p_delta": int(action in DELTA_ACTIONS),
        "p_write": int(action in WRITE_ACTIONS),
    }
    try:
        row = session.execute(_RECORD, params).one_or_none()
    except IntegrityError as exc:
        if isinstance(exc.orig, psycopg.errors.ForeignKeyViolation):
            raise NotFound("table", tbl_id) from exc
        raise
    # From the identity map when the caller loaded the table (no query), else one SELECT.
    table = session.get(Tbl, tbl_id)
    if table is None:
        raise NotFound("table", tbl_id)
    if row is None:
        return CommitRecorded(False, table)
    for name, value in zip(_COUNTER_COLUMNS, row, strict=True):
        set_committed_value(table, name, value)
    return CommitRecorded(True, table)


def list_commits(
    session: Session, tbl_id: int, *, limit: int = 100, before_instant: str | None = None
) -> list[Commit]:
    """Newest first; pass the last instant seen as `before_instant` for the next page."""
    stmt = select(Commit).where(Commit.tbl_id == tbl_id).order_by(Commit.instant.desc())
    if before_instant is not None:
        stmt = stmt.where(Commit.instant < before_instant)
    return list(session.scalars(stmt.limit(limit)))
