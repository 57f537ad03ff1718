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
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy import ColumnElement, Text, cast, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.orm.util import identity_key

from tms.store.errors import NotFound
from tms.store.measured import LATEST_MEASURED, LATEST_MEASURED_SQL, Measured, measured_of
from tms.store.models import Commit, Operation, OperationStatus, ServiceAction, TableType, Tbl
from tms.store.tables import normalize_base_path

__all__ = [
    "COUNTED",
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
# also count towards compaction and log compaction. Every commit, table services and
# housekeeping included, makes one delta commit on the metadata table, so all of them count
# towards its compaction.
WRITE_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit"})
DELTA_ACTIONS = frozenset({"deltacommit"})
SERVICE_ACTIONS = frozenset({"compaction", "clustering", "clean", "logcompaction"})
"""A compaction, clustering, clean or log compaction on the timeline (a writer's own, or ours
read back by a pull) restarts the counters of that service; a compaction restarts the log
compaction's too, as it leaves no log blocks to merge."""


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
    log_bytes: int = 0
    small_files: dict[str, int] = field(default_factory=dict)
    """Small base files written, per partition path."""
    pulled: bool = False
    """Read from the timeline by the pull fallback rather than notified by a writer."""


@dataclass(frozen=True)
class CountedTable:
    """A table's counters after a batch, with what its policies decide on: its settings
    and the actions that have a SCHEDULED or RUNNING operation."""

    id: int
    table_type: TableType | None
    enabled_actions: list[ServiceAction]
    paused: bool
    policy: dict[str, Any]
    delta_commits_since_compaction: int
    commits_since_clean: int
    commits_since_clustering: int
    commits_since_metadata_compaction: int
    delta_commits_since_log_compaction: int
    pending_actions: frozenset[ServiceAction]
    log_bytes_since_compaction: int = 0
    log_files_since_compaction: int = 0
    small_files_since_clustering: dict[str, int] = field(default_factory=dict)
    """Small base files written since the last clustering, per partition path."""
    last_run_at: dict[ServiceAction, datetime] = field(default_factory=dict)
    """When compaction, clustering and clean last ran (their counters restarted), and when
    the policy last created a partition TTL."""
    created_at: datetime | None = None
    """When the table was registered: the time-based triggers' clock before a first run."""
    commits_since_archival: int = 0
    """Writes since the policy last created an archival."""
    measurement: Measured | None = None
    """The table's latest measurement with figures (None before its first), for the
    `auto` trigger."""

    @classmethod
    def of_row(cls, row: Sequence[Any]) -> CountedTable:
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
            since_log_compaction,
            pending,
            log_bytes,
            log_files,
            small_files,
            last_compaction_at,
            last_clustering_at,
            last_clean_at,
            created_at,
            since_archival,
            last_partition_ttl_at,
            latest_measured,
        ) = row
        last_run_at = {
            action: at
            for action, at in (
                (ServiceAction.COMPACTION, last_compaction_at),
                (ServiceAction.CLUSTERING, last_clustering_at),
                (ServiceAction.CLEAN, last_clean_at),
                (ServiceAction.PARTITION_TTL, last_partition_ttl_at),
            )
            if at is not None
        }
        return cls(
            id,
            TableType(table_type) if table_type else None,
            [ServiceAction(a) for a in enabled or ()],
            paused,
            policy or {},
            deltas,
            since_clean,
            since_clustering,
            since_metadata_compaction,
            since_log_compaction,
            frozenset(ServiceAction(a) for a in pending),
            log_bytes,
            log_files,
            {str(k): int(v) for k, v in (small_files or {}).items()},
            last_run_at,
            created_at,
            since_archival,
            measured_of(latest_measured),
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
INSERT INTO commit (tbl_id, instant, action, records, bytes, files, log_files, log_bytes, pulled)
SELECT (r->>0)::bigint, r->>1, r->>2, (r->>3)::bigint, (r->>4)::bigint, (r->>5)::int,
       (r->>6)::int, (r->>7)::bigint, (r->>8)::bool
FROM json_array_elements(%(rows)s::json) AS r
ON CONFLICT (tbl_id, instant) DO NOTHING
RETURNING tbl_id, instant
"""

COUNTED: tuple[ColumnElement[Any] | InstrumentedAttribute[Any], ...] = (
    Tbl.id,
    cast(Tbl.table_type, Text),
    cast(Tbl.enabled_actions, ARRAY(Text)),
    Tbl.paused,
    Tbl.policy,
    Tbl.delta_commits_since_compaction,
    Tbl.commits_since_clean,
    Tbl.commits_since_clustering,
    Tbl.commits_since_metadata_compaction,
    Tbl.delta_commits_since_log_compaction,
    func.array(
        select(cast(Operation.action, Text))
        .distinct()
        .where(
            Operation.tbl_id == Tbl.id,
            Operation.status.in_([OperationStatus.SCHEDULED, OperationStatus.RUNNING]),
            Operation.is_deleted.is_(False),
        )
        .scalar_subquery()
    ),
    Tbl.log_bytes_since_compaction,
    Tbl.log_files_since_compaction,
    Tbl.small_files_since_clustering,
    Tbl.last_compaction_at,
    Tbl.last_clustering_at,
    Tbl.last_clean_at,
    Tbl.created_at,
    Tbl.commits_since_archival,
    Tbl.last_partition_ttl_at,
    LATEST_MEASURED,
)
"""What `CountedTable.of_row` reads, in order, of a `tbl` row (`_COUNT` returns the same)."""

# What the counters of a table hold after a batch. A batch without a compaction, clustering,
# clean or log compaction (a writer's own, or ours read back by a pull) adds its commits; one
# with such a service recounts from the stored commits after the newest one of that service
# (for the log compaction's counter, the newest log compaction or compaction), so the
# counters are right whatever order the commits were heard in (a pull may bring a
# compaction after the delta commits that followed it were notified). The small-files map
# keeps its 1000 largest partitions. RETURNING lists `COUNTED`'s columns, in its order.
_COUNT = (
    """
UPDATE tbl SET
  delta_commits_since_compaction = CASE WHEN u.compacted
    THEN (SELECT count(*) FROM commit c WHERE c.tbl_id = tbl.id
            AND c.instant > (SELECT max(s.instant) FROM commit s
                             WHERE s.tbl_id = tbl.id AND s.action = 'compaction')
          AND c.action = 'deltacommit')
    ELSE tbl.delta_commits_since_compaction + u.deltas END,
  delta_commits_since_log_compaction = CASE WHEN u.compacted OR u.log_compacted
    THEN (SELECT count(*) FROM commit c WHERE c.tbl_id = tbl.id
            AND c.instant > (SELECT max(s.instant) FROM commit s
                             WHERE s.tbl_id = tbl.id
                               AND s.action IN ('compaction', 'logcompaction'))
          AND c.action = 'deltacommit')
    ELSE tbl.delta_commits_since_log_compaction + u.deltas END,
  log_bytes_since_compaction = CASE WHEN u.compacted
    THEN (SELECT coalesce(sum(c.log_bytes), 0) FROM commit c
          WHERE c.tbl_id = tbl.id
            AND c.instant > (SELECT max(s.instant) FROM commit s
                             WHERE s.tbl_id = tbl.id AND s.action = 'compaction'))
    ELSE tbl.log_bytes_since_compaction + u.log_bytes END,
  log_files_since_compaction = CASE WHEN u.compacted
    THEN (SELECT coalesce(sum(c.log_files), 0) FROM commit c
          WHERE c.tbl_id = tbl.id
            AND c.instant > (SELECT max(s.instant) FROM commit s
                             WHERE s.tbl_id = tbl.id AND s.action = 'compaction'))
    ELSE tbl.log_files_since_compaction + u.log_files END,
  commits_since_clean = CASE WHEN u.cleaned
    THEN (SELECT count(*) FROM commit c WHERE c.tbl_id = tbl.id
            AND c.instant > (SELECT max(s.instant) FROM commit s
                             WHERE s.tbl_id = tbl.id AND s.action = 'clean')
          AND c.action IN ('commit', 'deltacommit', 'replacecommit'))
    ELSE tbl.commits_since_clean + u.writes END,
  commits_since_clustering = CASE WHEN u.clustered
    THEN (SELECT count(*) FROM commit c WHERE c.tbl_id = tbl.id
            AND c.instant > (SELECT max(s.instant) FROM commit s
                             WHERE s.tbl_id = tbl.id AND s.action = 'clustering')
          AND c.action IN ('commit', 'deltacommit', 'replacecommit'))
    ELSE tbl.commits_since_clustering + u.writes END,
  small_files_since_clustering = (
    SELECT coalesce(jsonb_object_agg(m.k, m.n), '{}'::jsonb) FROM (
      SELECT p.k, sum(p.n) AS n FROM (
        SELECT e.key AS k, e.value::text::bigint AS n FROM jsonb_each(CASE WHEN u.clustered
          THEN '{}'::jsonb ELSE tbl.small_files_since_clustering END) AS e
        UNION ALL
        SELECT e.key, e.value::text::bigint FROM jsonb_each(u.small_files) AS e
      ) p GROUP BY p.k ORDER BY n DESC LIMIT 1000
    ) m),
  last_compaction_at = CASE WHEN u.compacted THEN now() ELSE tbl.last_compaction_at END,
  last_clustering_at = CASE WHEN u.clustered THEN now() ELSE tbl.last_clustering_at END,
  last_clean_at = CASE WHEN u.cleaned THEN now() ELSE tbl.last_clean_at END,
  commits_since_metadata_compaction = tbl.commits_since_metadata_compaction + u.commits,
  commits_since_archival = tbl.commits_since_archival + u.writes,
  last_commit_instant = greatest(tbl.last_commit_instant, u.last_instant),
  last_notification_at = CASE WHEN u.pulled THEN tbl.last_notification_at ELSE now() END,
  last_commit_seen_at = now(),
  updated_at = now()
FROM (SELECT (r->>0)::bigint AS id, (r->>1)::int AS deltas, (r->>2)::int AS writes,
             (r->>3)::bool AS compacted, (r->>4)::bool AS clustered, (r->>5)::bool AS cleaned,
             r->>6 AS last_instant, (r->>7)::int AS commits, (r->>8)::bigint AS log_bytes,
             (r->>9)::bigint AS log_files, (r->10)::jsonb AS small_files, (r->>11)::bool AS pulled,
             (r->>12)::bool AS log_compacted
      FROM json_array_elements(%(rows)s::json) AS r) AS u
WHERE tbl.id = u.id
RETURNING
  tbl.id, tbl.table_type::text, tbl.enabled_actions::text[], tbl.paused, tbl.policy,
  tbl.delta_commits_since_compaction, tbl.commits_since_clean, tbl.commits_since_clustering,
  tbl.commits_since_metadata_compaction, tbl.delta_commits_since_log_compaction,
  ARRAY(SELECT DISTINCT o.action::text FROM operation o
        WHERE o.tbl_id = tbl.id AND o.status IN ('SCHEDULED', 'RUNNING') AND NOT o.is_deleted),
  tbl.log_bytes_since_compaction, tbl.log_files_since_compaction,
  tbl.small_files_since_clustering, tbl.last_compaction_at, tbl.last_clustering_at,
  tbl.last_clean_at, tbl.created_at, tbl.commits_since_archival, tbl.last_partition_ttl_at,
  """
    + LATEST_MEASURED_SQL
)


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
    """What a table's new commits add to its counters, and which services among them make
    the counters recount (`_COUNT`)."""

    deltas: int = 0
    writes: int = 0
    compacted: bool = False
    log_compacted: bool = False
    clustered: bool = False
    cleaned: bool = False
    last_instant: str = ""
    commits: int = 0
    log_bytes: int = 0
    log_files: int = 0
    small_files: dict[str, int] = field(default_factory=dict)
    pulled: bool = False

    def add(self, commit: CommitIn) -> None:
        action = commit.action
        self.compacted |= action == "compaction"
        self.log_compacted |= action == "logcompaction"
        self.clustered |= action == "clustering"
        self.cleaned |= action == "clean"
        self.deltas += action in DELTA_ACTIONS
        self.writes += action in WRITE_ACTIONS
        self.commits += 1
        self.log_bytes += commit.log_bytes
        self.log_files += commit.log_files
        for partition, count in commit.small_files.items():
            self.small_files[partition] = self.small_files.get(partition, 0) + count
        self.last_instant = max(self.last_instant, commit.instant)
        self.pulled = commit.pulled

    def row(self, tbl_id: int) -> tuple[Any, ...]:
        """The table's row of `_COUNT`'s input."""
        return (
            tbl_id,
            self.deltas,
            self.writes,
            self.compacted,
            self.clustered,
            self.cleaned,
            self.last_instant,
            self.commits,
            self.log_bytes,
            self.log_files,
            self.small_files,
            self.pulled,
            self.log_compacted,
        )


def record_commits(session: Session, commits: Sequence[CommitIn]) -> CommitsRecorded:
    """Store `commits` (`INSERT … ON CONFLICT DO NOTHING`), then bump the counters and last
    instant of their tables by the commits that were new, in one statement each.

    A compaction, clustering, clean or log compaction among them (a writer's own, or ours
    that a pull read back) sets that service's counters to what the stored commits after the
    newest one of it add up to. Raises `NotFound` for an unknown table.
    """
    if not commits:
        return CommitsRecorded([])
    order = sorted(range(len(commits)), key=lambda i: (commits[i].tbl_id, commits[i].instant))
    rows = [commits[i] for i in order]  # index order, so concurrent batches wait, not deadlock
    with _cursor(session) as cursor:
        try:
            values = [
                (
                    c.tbl_id,
                    c.instant,
                    c.action,
                    c.records,
                    c.bytes_written,
                    c.files,
                    c.log_files,
                    c.log_bytes,
                    c.pulled,
                )
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
                increments[commit.tbl_id].add(commit)
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
