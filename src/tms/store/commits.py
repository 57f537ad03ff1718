"""Commit notifications: stored once per (table, instant), counted once, many per statement.

Hudi's callback has no retry and writers may still send duplicates (restarts, our own
clients), so a commit is counted only when its insert stored a row. Notifications arrive
concurrently from many writers; `record_commits` stores a whole batch of them with one
insert and one counter update, so a transaction (and its WAL flush) serves many.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from tms.store.errors import NotFound
from tms.store.models import Action, Commit, TableType, Tbl
from tms.store.tables import normalize_base_path

__all__ = [
    "DELTA_ACTIONS",
    "SERVICE_ACTIONS",
    "WRITE_ACTIONS",
    "CommitIn",
    "CommitsRecorded",
    "CountedTable",
    "TableRef",
    "list_commits",
    "lock_tables_by_base_path",
    "record_commits",
]

# Commits that add data (and so count towards clean and clustering thresholds); delta commits
# also count towards compaction. Every commit, table services and housekeeping included, makes
# one delta commit on the metadata table, so all of them count towards its compaction.
WRITE_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit"})
DELTA_ACTIONS = frozenset({"deltacommit"})
SERVICE_ACTIONS = frozenset({"compaction", "clustering"})
"""A writer's own compaction or clustering restarts the counter of that service."""


@dataclass(slots=True)
class TableRef:
    """What a notification needs of its table before its commit is stored."""

    id: int
    table_type: TableType | None


@dataclass(slots=True)
class CommitIn:
    """One notified commit of a registered table."""

    tbl_id: int
    instant: str
    action: str
    records: int = 0
    bytes_written: int = 0
    files: int = 0
    log_files: int = 0


@dataclass(frozen=True)
class CountedTable:
    """A table's counters after a batch, with what its policies decide on: its settings
    and the actions that have a SCHEDULED or RUNNING operation."""

    id: int
    table_type: TableType | None
    enabled_actions: list[Action]
    paused: bool
    policy: dict[str, Any]
    delta_commits_since_compaction: int
    commits_since_clean: int
    commits_since_clustering: int
    commits_since_metadata_compaction: int
    pending_actions: frozenset[Action]

    @classmethod
    def of_row(cls, row: tuple[Any, ...]) -> CountedTable:
        (
            id,
            table_type,
            enabled,
            paused,
            policy,
            deltas,
            since_clean,
            since_clustering,
            since_metadata_compaction,
            pending,
        ) = row
        return cls(
            id,
            TableType(table_type) if table_type else None,
            [Action(a) for a in enabled or ()],
            paused,
            policy or {},
            deltas,
            since_clean,
            since_clustering,
            since_metadata_compaction,
            frozenset(Action(a) for a in pending),
        )


@dataclass(frozen=True)
class CommitsRecorded:
    """`new[i]` is False when commit `i` was stored before (or earlier in the same batch);
    `tables` holds every table that got a new commit, with its counters as they are now."""

    new: list[bool]
    tables: dict[int, CountedTable] = field(default_factory=dict)


# The statements below run on the session's psycopg connection directly: they carry every
# notification, and SQLAlchemy's per-statement and per-row work would cost more than
# PostgreSQL's. Rows travel as one JSON array of arrays (`json.dumps` is far cheaper than
# adapting a Python list per column) that PostgreSQL takes apart.
_LOCK = """
SELECT id, base_path, table_type::text FROM tbl WHERE base_path = ANY(%(paths)s::text[])
ORDER BY id FOR NO KEY UPDATE
"""

_INSERT = """
INSERT INTO commit (tbl_id, instant, action, records, bytes, files, log_files)
SELECT (r->>0)::bigint, r->>1, r->>2, (r->>3)::bigint, (r->>4)::bigint, (r->>5)::int,
       (r->>6)::int
FROM json_array_elements(%(rows)s::json) AS r
ON CONFLICT (tbl_id, instant) DO NOTHING
RETURNING tbl_id, instant
"""

# Per table: delta commits and writes to add, and whether the batch held a writer's own
# compaction or clustering (the counter restarts from the commits after it).
_COUNT = """
UPDATE tbl SET
  delta_commits_since_compaction = u.deltas
    + CASE WHEN u.compacted THEN 0 ELSE tbl.delta_commits_since_compaction END,
  commits_since_clean = tbl.commits_since_clean + u.writes,
  commits_since_clustering = u.writes_since_clustering
    + CASE WHEN u.clustered THEN 0 ELSE tbl.commits_since_clustering END,
  commits_since_metadata_compaction = tbl.commits_since_metadata_compaction + u.commits,
  last_commit_instant = greatest(tbl.last_commit_instant, u.last_instant),
  last_notification_at = now(),
  updated_at = now()
FROM (SELECT (r->>0)::bigint AS id, (r->>1)::int AS deltas, (r->>2)::int AS writes,
             (r->>3)::int AS writes_since_clustering, (r->>4)::bool AS compacted,
             (r->>5)::bool AS clustered, r->>6 AS last_instant, (r->>7)::int AS commits
      FROM json_array_elements(%(rows)s::json) AS r) AS u
WHERE tbl.id = u.id
RETURNING tbl.id, tbl.table_type::text, tbl.enabled_actions::text[], tbl.paused, tbl.policy,
  tbl.delta_commits_since_compaction, tbl.commits_since_clean, tbl.commits_since_clustering,
  tbl.commits_since_metadata_compaction,
  ARRAY(SELECT DISTINCT o.action::text FROM operation o
        WHERE o.tbl_id = tbl.id AND o.status IN ('SCHEDULED', 'RUNNING') AND NOT o.is_deleted)
"""


def _cursor(session: Session) -> psycopg.Cursor[Any]:
    """A cursor on the session's connection, inside its transaction."""
    connection = session.connection().connection.driver_connection
    if connection is None:
        raise RuntimeError("the session's connection is closed")
    cursor: psycopg.Cursor[Any] = connection.cursor()
    return cursor


def lock_tables_by_base_path(session: Session, base_paths: Collection[str]) -> dict[str, TableRef]:
    """The registered tables at `base_paths` (any spelling), by normalized base path,
    locked in id order against concurrent counter updates until the transaction ends."""
    paths = sorted({normalize_base_path(p) for p in base_paths})
    with _cursor(session) as cursor:
        rows = cursor.execute(_LOCK, {"paths": paths}).fetchall()
    return {
        path: TableRef(id, TableType(table_type) if table_type else None)
        for id, path, table_type in rows
    }


@dataclass
class _Increments:
    """What a table's new commits add to its counters, walked in instant order."""

    deltas: int = 0
    writes: int = 0
    writes_since_clustering: int = 0
    compacted: bool = False
    clustered: bool = False
    last_instant: str = ""
    commits: int = 0

    def add(self, instant: str, action: str) -> None:
        if action == "compaction":
            self.compacted, self.deltas = True, 0
        elif action == "clustering":
            self.clustered, self.writes_since_clustering = True, 0
        self.deltas += action in DELTA_ACTIONS
        self.writes += action in WRITE_ACTIONS
        self.writes_since_clustering += action in WRITE_ACTIONS
        self.commits += 1
        self.last_instant = max(self.last_instant, instant)

    def row(self, tbl_id: int) -> tuple[Any, ...]:
        """The table's row of `_COUNT`'s input."""
        return (
            tbl_id,
            self.deltas,
            self.writes,
            self.writes_since_clustering,
            self.compacted,
            self.clustered,
            self.last_instant,
            self.commits,
        )


def record_commits(session: Session, commits: Sequence[CommitIn]) -> CommitsRecorded:
    """Store `commits` (`INSERT … ON CONFLICT DO NOTHING`), then bump the counters and last
    instant of their tables by the commits that were new, in one statement each.

    A writer's own compaction (clustering) sets the compaction (clustering) counter back
    to the delta commits (writes) after it. Raises `NotFound` for an unknown table.
    """
    if not commits:
        return CommitsRecorded([])
    order = sorted(range(len(commits)), key=lambda i: (commits[i].tbl_id, commits[i].instant))
    rows = [commits[i] for i in order]  # index order, so concurrent batches wait, not deadlock
    with _cursor(session) as cursor:
        try:
            values = [
                (c.tbl_id, c.instant, c.action, c.records, c.bytes_written, c.files, c.log_files)
                for c in rows
            ]
            inserted = cursor.execute(_INSERT, {"rows": json.dumps(values)}).fetchall()
        except psycopg.errors.ForeignKeyViolation as exc:
            raise NotFound("table", ", ".join(sorted({str(c.tbl_id) for c in rows}))) from exc
        unclaimed = set(inserted)
        new = [False] * len(commits)
        increments: dict[int, _Increments] = defaultdict(_Increments)
        for i in order:  # the first of repeated commits in one batch is the new one
            commit = commits[i]
            key = (commit.tbl_id, commit.instant)
            if key in unclaimed:
                unclaimed.discard(key)
                new[i] = True
                increments[commit.tbl_id].add(commit.instant, commit.action)
        if not increments:
            return CommitsRecorded(new)
        steps = [s.row(i) for i, s in sorted(increments.items())]
        counted = cursor.execute(_COUNT, {"rows": json.dumps(steps)}).fetchall()
    for tbl_id in increments:  # rows of these tables the session holds are out of date now
        loaded = session.identity_map.get(identity_key(Tbl, tbl_id))
        if loaded is not None:
            session.expire(loaded)
    return CommitsRecorded(new, {row[0]: CountedTable.of_row(row) for row in counted})


def list_commits(
    session: Session, tbl_id: int, *, limit: int = 100, before_instant: str | None = None
) -> list[Commit]:
    """Newest first; pass the last instant seen as `before_instant` for the next page."""
    stmt = select(Commit).where(Commit.tbl_id == tbl_id).order_by(Commit.instant.desc())
    if before_instant is not None:
        stmt = stmt.where(Commit.instant < before_instant)
    return list(session.scalars(stmt.limit(limit)))
