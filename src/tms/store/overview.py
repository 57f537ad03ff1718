"""What the operator console summarizes: operations per queue, attempts finished per time
bucket, and tables with their backlog and recent failures, sorted and searched in SQL so a
service with thousands of tables answers one page at a time."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, String, and_, cast, func, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from tms.store.models import Attempt, AttemptOutcome, Operation, OperationStatus, Tbl

__all__ = [
    "FAILED_OUTCOMES",
    "QueueCounts",
    "TableSort",
    "TableSummary",
    "ThroughputBucket",
    "attempt_throughput",
    "queue_counts",
    "table_summaries",
]

FAILED_OUTCOMES = (AttemptOutcome.FAILED, AttemptOutcome.LOST)
"""Outcomes that count as failures (a cancelled attempt was asked to stop)."""


@dataclass(frozen=True)
class QueueCounts:
    queue: str
    running: int
    queued: int
    """SCHEDULED operations, due or waiting for their retry time."""


def queue_counts(session: Session) -> list[QueueCounts]:
    """Running and scheduled operations per queue (queues with neither are left out)."""
    running = func.count().filter(Operation.status == OperationStatus.RUNNING)
    queued = func.count().filter(Operation.status == OperationStatus.SCHEDULED)
    stmt = (
        select(Operation.queue, running, queued)
        .where(
            Operation.is_deleted.is_(False),
            Operation.status.in_([OperationStatus.RUNNING, OperationStatus.SCHEDULED]),
        )
        .group_by(Operation.queue)
        .order_by(Operation.queue)
    )
    return [QueueCounts(row[0], row[1], row[2]) for row in session.execute(stmt)]


@dataclass(frozen=True)
class ThroughputBucket:
    start: datetime
    succeeded: int
    failed: int
    """FAILED or LOST attempts."""
    cancelled: int


def attempt_throughput(
    session: Session, *, span: timedelta, bucket: timedelta, now: datetime
) -> list[ThroughputBucket]:
    """Attempts finished in each `bucket` of the last `span` before `now`, oldest first,
    every bucket present (zeros where nothing finished)."""
    step = bucket.total_seconds()
    count = int(span.total_seconds() // step)
    end = now.timestamp()
    first = (end // step + 1 - count) * step  # bucket starts aligned to the bucket size
    start = datetime.fromtimestamp(first, tz=now.tzinfo)
    index = func.floor((func.extract("epoch", Attempt.finished_at) - first) / step)
    stmt = (
        select(index, Attempt.outcome, func.count())
        .where(Attempt.finished_at >= start, Attempt.finished_at <= now)
        .group_by(index, Attempt.outcome)
    )
    cells: dict[tuple[int, AttemptOutcome], int] = {}
    for position, outcome, n in session.execute(stmt):
        cells[(int(position), outcome)] = n
    buckets = []
    for i in range(count):
        failed = sum(cells.get((i, o), 0) for o in FAILED_OUTCOMES)
        buckets.append(
            ThroughputBucket(
                start=datetime.fromtimestamp(first + i * step, tz=now.tzinfo),
                succeeded=cells.get((i, AttemptOutcome.SUCCEEDED), 0),
                failed=failed,
                cancelled=cells.get((i, AttemptOutcome.CANCELLED), 0),
            )
        )
    return buckets


class TableSort(enum.StrEnum):
    """Orders of the console's table list."""

    NAME = "name"
    DELTA_COMMITS = "delta_commits_since_compaction"
    CLEAN_COMMITS = "commits_since_clean"
    LAST_COMMIT = "last_commit_seen_at"
    PAUSED = "paused"
    FAILURES = "failures_24h"


@dataclass(frozen=True)
class TableSummary:
    table: Tbl
    failures_24h: int
    running: int
    scheduled: int


def _per_table(condition: ColumnElement[bool], *, attempts: bool = False) -> ColumnElement[int]:
    """A correlated count per table: its operations (or their attempts) matching
    `condition`."""
    stmt: Select[tuple[int]] = select(func.count()).select_from(Operation)  # type: ignore[assignment]
    if attempts:
        stmt = stmt.join(Attempt, Attempt.operation_id == Operation.id)
    scalar = stmt.where(Operation.tbl_id == Tbl.id, condition).scalar_subquery()
    return func.coalesce(scalar, 0)


def table_summaries(
    session: Session,
    *,
    search: str | None,
    sort: TableSort,
    descending: bool,
    limit: int,
    offset: int,
    now: datetime,
) -> tuple[list[TableSummary], int]:
    """A page of tables whose name or base path contains `search` (case-insensitive), in
    `sort` order (ties by id), with the count of all that match."""
    failures = _per_table(
        and_(
            Attempt.outcome.in_(FAILED_OUTCOMES),
            Attempt.finished_at >= now - timedelta(hours=24),
        ),
        attempts=True,
    ).label("failures_24h")
    not_deleted = Operation.is_deleted.is_(False)
    running = _per_table(and_(not_deleted, Operation.status == OperationStatus.RUNNING))
    scheduled = _per_table(and_(not_deleted, Operation.status == OperationStatus.SCHEDULED))
    conditions: list[ColumnElement[bool]] = []
    if search:
        pattern = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        name = Tbl.db_name + "." + Tbl.table_name
        conditions.append(
            or_(
                cast(name, String).ilike(pattern, escape="\\"),
                Tbl.base_path.ilike(pattern, escape="\\"),
            )
        )
    keys: dict[TableSort, list[ColumnElement[Any] | InstrumentedAttribute[Any]]] = {
        TableSort.NAME: [Tbl.db_name, Tbl.table_name],
        TableSort.DELTA_COMMITS: [Tbl.delta_commits_since_compaction],
        TableSort.CLEAN_COMMITS: [Tbl.commits_since_clean],
        TableSort.LAST_COMMIT: [Tbl.last_commit_seen_at],
        TableSort.PAUSED: [Tbl.paused],
        TableSort.FAILURES: [failures],
    }
    order = [(k.desc().nulls_last() if descending else k.asc().nulls_last()) for k in keys[sort]]
    stmt = (
        select(Tbl, failures, running, scheduled)
        .where(*conditions)
        .order_by(*order, Tbl.id)
        .limit(limit)
        .offset(offset)
    )
    rows = [TableSummary(row[0], row[1], row[2], row[3]) for row in session.execute(stmt)]
    total = session.scalar(select(func.count()).select_from(Tbl).where(*conditions)) or 0
    return rows, total
