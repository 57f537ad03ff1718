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
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    FromClause,
    Interval,
    Update,
    and_,
    case,
    cast,
    func,
    literal,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.orm import Session

from tms.store.commits import COUNTED, CountedTable
from tms.store.models import Commit, Tbl
from tms.store.transitions import clock

__all__ = [
    "PullTarget",
    "claim_pulls",
    "counted_tables",
    "finish_pulls",
    "known_instants",
]

_NEVER = cast(literal("-infinity"), DateTime(timezone=True))
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
        _claim(owner, limit, lease_seconds, timeout_seconds, sweep_seconds, clock(now))
    ).all()
    return [
        PullTarget(id, base_path, dict(options or {}), silent)
        for id, base_path, options, silent in sorted(rows, key=lambda row: row[0])
    ]


def _claim(
    owner: str,
    limit: int,
    lease_seconds: float,
    timeout_seconds: float,
    sweep_seconds: float,
    now: ColumnElement[datetime],
) -> Update:
    """Candidates are picked without locks, so that the planner keeps only the top rows of
    its sort (a locking query sorts every due table first); then the first of them that no
    other claim holds are locked and leased. Over 10,000 tables this halves the claim."""
    t = Tbl.__table__.alias("t")
    # The table's own timeout when its policy sets a number, else the service's; 0 = never.
    own = t.c.policy["notification_timeout_seconds"]
    timeout = case(
        (func.jsonb_typeof(own) == "number", own.as_float()), else_=float(timeout_seconds)
    )
    x = select(timeout.label("timeout")).correlate(t).lateral("x")
    heard = func.coalesce(func.greatest(t.c.last_notification_at, t.c.last_pulled_at), _NEVER)
    silent = and_(x.c.timeout > 0, heard <= now - _seconds(x.c.timeout))
    s = select(silent.label("silent")).correlate(t, x).lateral("s")
    due_now: ColumnElement[bool] = s.c.silent
    if sweep_seconds > 0:
        swept = func.coalesce(t.c.last_pulled_at, _NEVER) <= now - _seconds(sweep_seconds)
        due_now = or_(s.c.silent, swept)
    candidates = (
        select(t.c.id, s.c.silent, t.c.last_pulled_at)
        .select_from(t.join(x, true()).join(s, true()))
        .where(_free(t, now), due_now)
        .order_by(s.c.silent.desc(), t.c.last_pulled_at.asc().nulls_first(), t.c.id)
        .limit(SCAN * limit + 16)
        .cte("candidates")
    )
    d = Tbl.__table__.alias("d")
    due = (
        select(d.c.id, candidates.c.silent)
        .join_from(d, candidates, candidates.c.id == d.c.id)
        .where(_free(d, now))
        .order_by(
            candidates.c.silent.desc(), candidates.c.last_pulled_at.asc().nulls_first(), d.c.id
        )
        .limit(limit)
        .with_for_update(of=d, skip_locked=True)
        .cte("due")
    )
    return (
        update(Tbl)
        .where(Tbl.id == due.c.id)
        .values(pull_lease_owner=owner, pull_lease_expires_at=now + _seconds(lease_seconds))
        .returning(Tbl.id, Tbl.base_path, Tbl.storage_options, due.c.silent)
        .execution_options(synchronize_session=False)
    )


def _free(t: FromClause, now: ColumnElement[datetime]) -> ColumnElement[bool]:
    """Not leased, or its lease expired."""
    expires = t.c.pull_lease_expires_at
    return or_(expires.is_(None), expires < now)


def _seconds(seconds: ColumnElement[float] | float) -> ColumnElement[timedelta]:
    """`make_interval(secs => seconds)`."""
    return func.make_interval(0, 0, 0, 0, 0, 0, seconds, type_=Interval)


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
        select(*COUNTED)
        .where(Tbl.id.in_(sorted(tbl_ids)))
        .order_by(Tbl.id)
        .with_for_update(key_share=True)
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
        .values(last_pulled_at=func.now(), pull_lease_owner=None, pull_lease_expires_at=None)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
