"""The database work of a batch of commit notifications, in one transaction.

Tables are looked up (and locked, in id order) by base path, the commits stored, the
counters bumped and the policies run for every table that got a new commit; the batch's
operations belong to its newest notification of their table. A notification for a base
path nobody registered stores nothing: the endpoint registers the table and sends it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from tms import metrics
from tms.application import OperationManager
from tms.ingest.commit_action import CommitSummary, action_from_table_type
from tms.store import (
    CommitIn,
    Operation,
    lock_tables_by_base_path,
    normalize_base_path,
    record_commits,
)

__all__ = ["Notification", "Outcome", "database_unreachable", "write_notifications"]

_ATTEMPTS = 3
"""A batch that loses a deadlock or serialization conflict is written again this often."""


@dataclass(slots=True)
class Notification:
    """One commit callback, as the endpoint understood it."""

    base_path: str
    instant: str
    action: str | None
    """None: the table's type decides (merge-on-read tables make delta commits)."""
    action_source: str
    summary: CommitSummary


@dataclass(slots=True)
class Outcome:
    """`table_id` is None when no table is registered at the base path (nothing stored)."""

    table_id: int | None
    action: str | None
    action_source: str
    new: bool = False
    operations: list[Operation] = field(default_factory=list)


def write_notifications(
    factory: sessionmaker[Session],
    manager: OperationManager,
    notifications: Sequence[Notification],
) -> list[Outcome]:
    """Store the batch and commit; one outcome per notification, in order."""
    metrics.COMMIT_BATCH_SIZE.observe(len(notifications))
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            with factory() as session, session.begin():
                return _write(session, manager, notifications)
        except DBAPIError as exc:
            conflict = psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure
            if attempt == _ATTEMPTS or not isinstance(exc.orig, conflict):
                raise
    raise AssertionError("unreachable")


def database_unreachable(exc: Exception) -> bool:
    """A failure of the connection, not of the batch's data: no item would do better alone."""
    if not isinstance(exc, DBAPIError):
        return False
    broken = psycopg.OperationalError | psycopg.InterfaceError
    return exc.connection_invalidated or isinstance(exc.orig, broken)


def _write(
    session: Session, manager: OperationManager, notifications: Sequence[Notification]
) -> list[Outcome]:
    tables = lock_tables_by_base_path(session, [n.base_path for n in notifications])
    outcomes: list[Outcome] = []
    commits: list[CommitIn] = []
    for note in notifications:
        table = tables.get(normalize_base_path(note.base_path))
        if table is None:
            outcomes.append(Outcome(None, note.action, note.action_source))
            continue
        action, source = note.action, note.action_source
        if action is None:
            action, source = action_from_table_type(table.table_type), "table_type"
        outcomes.append(Outcome(table.id, action, source))
        summary = note.summary
        commits.append(
            CommitIn(
                table.id,
                note.instant,
                action,
                records=summary.records,
                bytes_written=summary.bytes_written,
                files=summary.files,
                log_files=summary.log_files,
            )
        )
    recorded = record_commits(session, commits)
    created = manager.create_due(session, recorded.tables.values())
    # Pair results with the notifications that had a table; operations go to the newest new
    # notification of their table.
    stored = iter(zip(commits, recorded.new, strict=True))
    newest: dict[int, tuple[str, int]] = {}
    for i, outcome in enumerate(outcomes):
        if outcome.table_id is None:
            continue
        commit, outcome.new = next(stored)
        if outcome.new and commit.instant >= newest.get(commit.tbl_id, ("", -1))[0]:
            newest[commit.tbl_id] = (commit.instant, i)
    for tbl_id, operations in created.items():
        i = newest[tbl_id][1]
        outcomes[i].operations.extend(operations)
    return outcomes
