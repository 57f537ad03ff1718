"""Commit notifications: stored once per (table, instant), counted once.

Hudi's callback has no retry and writers may still send duplicates (restarts, our own
clients), so the insert and the counter update are one statement that only counts a commit
it actually inserted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg
from sqlalchemy import func, literal, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

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
    now = literal(received_at) if received_at is not None else func.now()
    inserted = (
        insert(Commit)
        .values(
            tbl_id=tbl_id,
            instant=instant,
            action=action,
            records=records,
            bytes=bytes_written,
            files=files,
            log_files=log_files,
            received_at=now,
        )
        .on_conflict_do_nothing(index_elements=[Commit.tbl_id, Commit.instant])
        .returning(Commit.tbl_id)
        .cte("inserted")
    )
    write = int(action in WRITE_ACTIONS)
    delta = int(action in DELTA_ACTIONS)
    bump = (
        update(Tbl)
        .where(Tbl.id == select(inserted.c.tbl_id).scalar_subquery())
        .values(
            delta_commits_since_compaction=Tbl.delta_commits_since_compaction + delta,
            commits_since_clean=Tbl.commits_since_clean + write,
            commits_since_clustering=Tbl.commits_since_clustering + write,
            last_commit_instant=func.greatest(Tbl.last_commit_instant, instant),
            last_notification_at=now,
            updated_at=func.now(),
        )
        .returning(Tbl)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    try:
        table = session.scalars(bump).one_or_none()
    except IntegrityError as exc:
        if isinstance(exc.orig, psycopg.errors.ForeignKeyViolation):
            raise NotFound("table", tbl_id) from exc
        raise
    if table is not None:
        return CommitRecorded(True, table)
    existing = session.get(Tbl, tbl_id)
    if existing is None:
        raise NotFound("table", tbl_id)
    return CommitRecorded(False, existing)


def list_commits(
    session: Session, tbl_id: int, *, limit: int = 100, before_instant: str | None = None
) -> list[Commit]:
    """Newest first; pass the last instant seen as `before_instant` for the next page."""
    stmt = select(Commit).where(Commit.tbl_id == tbl_id).order_by(Commit.instant.desc())
    if before_instant is not None:
        stmt = stmt.where(Commit.instant < before_instant)
    return list(session.scalars(stmt.limit(limit)))
