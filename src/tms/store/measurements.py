"""Measurements of tables kept over time, and the sweep's leases on the tables it measures.

A table is due for a measurement once `interval_seconds` have passed since its last turn
(`tbl.last_measured_at`; never measured: due at once), the oldest turn first. A claim is one
statement that leases the rows it picks (`FOR UPDATE SKIP LOCKED`), so one instance at a
time measures a table; a lease that expires (the instance died mid-measurement) frees it
for the next claim. Recording a turn (measured, skipped or failed) inserts its row, moves
the clock, ends the lease and prunes the table's rows past retention, in the caller's
transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    FromClause,
    Interval,
    Update,
    cast,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.orm import Session

from tms.store.models import TableMeasurement, Tbl
from tms.store.transitions import clock

__all__ = [
    "MeasureTarget",
    "MeasurementIn",
    "claim_measurements",
    "latest_measurements",
    "list_measurements",
    "record_measurements",
]

_NEVER = cast(literal("-infinity"), DateTime(timezone=True))
SCAN = 4
"""Candidates per table to lease: those other instances lease meanwhile are skipped."""
SMALL_FILE_LIMIT_POLICY_KEY = "small_file_limit"
"""The table policy key of the small-file limit its measurements use."""


@dataclass(frozen=True)
class MeasureTarget:
    """A table leased to this instance for one measurement."""

    tbl_id: int
    name: str
    """`db.table`, as metrics name it."""
    base_path: str
    storage_options: dict[str, Any]
    paused: bool
    small_file_limit: int | None
    """The table policy's `small_file_limit`, if it sets one."""


@dataclass(frozen=True)
class MeasurementIn:
    """One turn of the sweep on a table, to record."""

    tbl_id: int
    status: str
    reason: str | None = None
    layout: dict[str, Any] | None = None
    writes: dict[str, Any] | None = None
    services: dict[str, Any] | None = None


def claim_measurements(
    session: Session,
    owner: str,
    *,
    limit: int,
    lease_seconds: float,
    interval_seconds: float,
    now: datetime | None = None,
) -> list[MeasureTarget]:
    """Lease up to `limit` tables due for a measurement to `owner` (see the module doc)."""
    if limit <= 0 or interval_seconds <= 0:
        return []
    rows = session.execute(_claim(owner, limit, lease_seconds, interval_seconds, clock(now)))
    targets = [
        MeasureTarget(
            id, f"{db}.{name}", base_path, dict(options or {}), paused, _limit(policy_limit)
        )
        for id, db, name, base_path, options, paused, policy_limit in rows
    ]
    return sorted(targets, key=lambda t: t.tbl_id)


def _limit(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _claim(
    owner: str,
    limit: int,
    lease_seconds: float,
    interval_seconds: float,
    now: ColumnElement[datetime],
) -> Update:
    """Candidates are picked without locks (the planner keeps only the top rows of its
    sort), then the first of them no other claim holds are locked and leased, as
    `tms.store.pulls` claims."""
    t = Tbl.__table__.alias("t")
    last = func.coalesce(t.c.last_measured_at, _NEVER)
    candidates = (
        select(t.c.id, t.c.last_measured_at)
        .where(_free(t, now), last <= now - _seconds(interval_seconds))
        .order_by(t.c.last_measured_at.asc().nulls_first(), t.c.id)
        .limit(SCAN * limit + 16)
        .cte("candidates")
    )
    d = Tbl.__table__.alias("d")
    due = (
        select(d.c.id)
        .join_from(d, candidates, candidates.c.id == d.c.id)
        .where(_free(d, now))
        .order_by(candidates.c.last_measured_at.asc().nulls_first(), d.c.id)
        .limit(limit)
        .with_for_update(of=d, skip_locked=True)
        .cte("due")
    )
    return (
        update(Tbl)
        .where(Tbl.id == due.c.id)
        .values(measure_lease_owner=owner, measure_lease_expires_at=now + _seconds(lease_seconds))
        .returning(
            Tbl.id,
            Tbl.db_name,
            Tbl.table_name,
            Tbl.base_path,
            Tbl.storage_options,
            Tbl.paused,
            Tbl.policy[SMALL_FILE_LIMIT_POLICY_KEY].as_integer(),
        )
        .execution_options(synchronize_session=False)
    )


def _free(t: FromClause, now: ColumnElement[datetime]) -> ColumnElement[bool]:
    """Not leased, or its lease expired."""
    expires = t.c.measure_lease_expires_at
    return or_(expires.is_(None), expires < now)


def _seconds(seconds: float) -> ColumnElement[timedelta]:
    return func.make_interval(0, 0, 0, 0, 0, 0, seconds, type_=Interval)


def record_measurements(
    session: Session,
    turns: Sequence[MeasurementIn],
    owner: str,
    *,
    keep_seconds: float,
    keep_rows: int,
    now: datetime | None = None,
) -> list[int]:
    """Record `turns` of tables `owner` still leases (a lease lost meanwhile is another
    instance's turn now: its row is not written), move their clocks, end the leases and
    prune their rows older than `keep_seconds` or beyond the newest `keep_rows`; the ids
    of the tables recorded."""
    if not turns:
        return []
    at = clock(now)
    ids = sorted({t.tbl_id for t in turns})
    held = set(
        session.scalars(
            update(Tbl)
            .where(Tbl.id.in_(ids), Tbl.measure_lease_owner == owner)
            .values(last_measured_at=at, measure_lease_owner=None, measure_lease_expires_at=None)
            .returning(Tbl.id)
        )
    )
    rows = [_row(t) for t in turns if t.tbl_id in held]
    if rows:
        session.execute(insert(TableMeasurement).values(measured_at=at), rows)
        prune_measurements(session, sorted(held), keep_seconds, keep_rows, now)
    return sorted(held)


def _row(turn: MeasurementIn) -> dict[str, Any]:
    return {
        "tbl_id": turn.tbl_id,
        "status": turn.status,
        "reason": turn.reason,
        "layout": turn.layout,
        "writes": turn.writes,
        "services": turn.services,
    }


def prune_measurements(
    session: Session,
    tbl_ids: Sequence[int],
    keep_seconds: float,
    keep_rows: int,
    now: datetime | None = None,
) -> int:
    """Delete the tables' rows measured over `keep_seconds` ago, or beyond their newest
    `keep_rows`; how many went."""
    if not tbl_ids:
        return 0
    m = TableMeasurement
    rank = (
        func.row_number().over(partition_by=m.tbl_id, order_by=(m.measured_at.desc(), m.id.desc()))
    ).label("rank")
    ranked = select(m.id, m.measured_at, rank).where(m.tbl_id.in_(tbl_ids)).subquery()
    old = clock(now) - _seconds(keep_seconds)
    gone = select(ranked.c.id).where(or_(ranked.c.rank > keep_rows, ranked.c.measured_at < old))
    result = session.execute(
        delete(m).where(m.id.in_(gone)).execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def list_measurements(
    session: Session,
    tbl_id: int,
    *,
    limit: int,
    since: datetime | None = None,
    status: str | None = None,
) -> list[TableMeasurement]:
    """The table's measurements, newest first: at most `limit`, measured at or after
    `since`, of one `status` when given."""
    m = TableMeasurement
    stmt = select(m).where(m.tbl_id == tbl_id)
    if since is not None:
        stmt = stmt.where(m.measured_at >= since)
    if status is not None:
        stmt = stmt.where(m.status == status)
    return list(session.scalars(stmt.order_by(m.measured_at.desc(), m.id.desc()).limit(limit)))


def latest_measurements(session: Session) -> list[tuple[str, TableMeasurement]]:
    """Each registered table's latest measurement with figures, with its `db.table` name."""
    m = TableMeasurement
    latest = (
        select(m.id)
        .where(m.status == "measured")
        .order_by(m.tbl_id, m.measured_at.desc(), m.id.desc())
        .ext(distinct_on(m.tbl_id))
    )
    stmt = (
        select(Tbl.db_name, Tbl.table_name, m)
        .join(Tbl, Tbl.id == m.tbl_id)
        .where(m.id.in_(latest.scalar_subquery()))
        .order_by(m.tbl_id)
    )
    return [(f"{db}.{name}", found) for db, name, found in session.execute(stmt)]
