"""The pull fallback's rows: which tables to read from storage next, and who reads them.

A table is due for a pull when it has been silent past its notification timeout (the
table's policy `notification_timeout_seconds`, else the setting; a table never notified
counts from the start, so one registered without any notification is pulled at once), or
when the periodic sweep has not read it for `pull_sweep_interval_seconds`. Silent tables
come first, then the ones read longest ago. A claim is one statement that leases the rows
it picks (`FOR UPDATE SKIP LOCKED`), so one instance at a time pulls a table; a lease that
expires (the instance died mid-pull) frees the table for the next claim.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from tms.store.commits import COUNTED_COLUMNS, CountedTable
from tms.store.models import Commit, Tbl

__all__ = [
    "PullTarget",
    "claim_pulls",
    "counted_tables",
    "finish_pulls",
    "known_instants",
]

_NOW = "COALESCE(CAST(:now AS timestamptz), now())"

# The table's own timeout when its policy sets a number, else the service's; 0 = never.
_TIMEOUT = (
    "CASE WHEN jsonb_typeof(t.policy->'notification_timeout_seconds') = 'number' "
    "THEN (t.policy->>'notification_timeout_seconds')::float8 ELSE :timeout END"
)
_FREE = f"(t.pull_lease_expires_at IS NULL OR t.pull_lease_expires_at < {_NOW})"

# Candidates are picked without locks, so that the planner keeps only the top rows of its
# sort (a locking query sorts every due table first); then the first of them that no other
# claim holds are locked and leased. Over 10,000 tables this halves the claim.
_CLAIM = f"""
WITH candidates AS (
    SELECT t.id, s.silent, t.last_pulled_at
    FROM tbl t
    CROSS JOIN LATERAL (SELECT {_TIMEOUT} AS timeout) x
    CROSS JOIN LATERAL (SELECT (x.timeout > 0 AND COALESCE(GREATEST(t.last_notification_at,
        t.last_pulled_at), '-infinity') <= {_NOW} - make_interval(secs => x.timeout)) AS silent) s
    WHERE {_FREE}
      AND (s.silent OR (:sweep > 0 AND COALESCE(t.last_pulled_at, '-infinity')
                        <= {_NOW} - make_interval(secs => :sweep)))
    ORDER BY s.silent DESC, t.last_pulled_at NULLS FIRST, t.id
    LIMIT :scan
),
due AS (
    SELECT t.id, c.silent
    FROM tbl t JOIN candidates c ON c.id = t.id
    WHERE {_FREE}
    ORDER BY c.silent DESC, c.last_pulled_at NULLS FIRST, t.id
    LIMIT :limit
    FOR UPDATE OF t SKIP LOCKED
)
UPDATE tbl SET pull_lease_owner = :owner,
               pull_lease_expires_at = {_NOW} + make_interval(secs => :lease)
FROM due
WHERE tbl.id = due.id
RETURNING tbl.id, tbl.base_path, tbl.storage_options, due.silent
"""
SCAN = 4
"""Candidates per table to lease: those other instances lease meanwhile are skipped."""


@dataclass(frozen=True)
class PullTarget:
    """A table leased to this instance for one pull."""

    tbl_id: int
    base_path: str
    storage_options: dict[str, Any]
    silent: bool
    """Past its notification timeout (else: the sweep's turn)."""


def claim_pulls(
    session: Session,
    owner: str,
    *,
    limit: int,
    lease_seconds: float,
    timeout_seconds: float,
    sweep_seconds: float,
    now: datetime | None = None,
) -> list[PullTarget]:
    """Lease up to `limit` tables due for a pull to `owner` (see the module doc)."""
    if limit <= 0:
        return []
    rows = session.execute(
        text(_CLAIM),
        {
            "owner": owner,
            "limit": limit,
            "scan": SCAN * limit + 16,
            "lease": lease_seconds,
            "timeout": timeout_seconds,
            "sweep": sweep_seconds,
            "now": now,
        },
    ).all()
    return [
        PullTarget(id, base_path, dict(options or {}), silent)
        for id, base_path, options, silent in sorted(rows, key=lambda row: row[0])
    ]


def known_instants(session: Session, tbl_id: int, *, since: str) -> set[str]:
    """The instants of the table's stored commits from `since` on."""
    stmt = select(Commit.instant).where(Commit.tbl_id == tbl_id, Commit.instant >= since)
    return set(session.scalars(stmt))


def counted_tables(session: Session, tbl_ids: Collection[int]) -> list[CountedTable]:
    """The tables' counters and settings as the triggers read them, rows locked against
    concurrent counting until the transaction ends."""
    if not tbl_ids:
        return []
    rows = session.execute(
        text(
            f"SELECT {COUNTED_COLUMNS} FROM tbl WHERE tbl.id = ANY(:ids) ORDER BY tbl.id "
            "FOR NO KEY UPDATE"
        ),
        {"ids": sorted(tbl_ids)},
    ).all()
    return [CountedTable.of_row(row) for row in rows]


def finish_pulls(session: Session, tbl_ids: Collection[int], owner: str) -> int:
    """Record the pulls (`last_pulled_at`) and end `owner`'s leases of the tables; how many
    it still held (a lease lost meanwhile is another instance's now: recording is
    idempotent, so a table pulled twice is no harm)."""
    if not tbl_ids:
        return 0
    result = session.execute(
        update(Tbl)
        .where(Tbl.id.in_(sorted(tbl_ids)), Tbl.pull_lease_owner == owner)
        .values(last_pulled_at=text("now()"), pull_lease_owner=None, pull_lease_expires_at=None)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
