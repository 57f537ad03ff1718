"""Claiming due operations, extending leases, and reaping the leases that expired.

Claims are one statement (see `_CLAIM`): lock due rows with `FOR UPDATE SKIP LOCKED` in
order of priority, due time and id; keep the first of each table and at most the free slots
of each limited queue and of each limited owner; set them RUNNING with a lease; insert their
attempts and events.

Fairness: an owner (the operation's, else its table's) listed in `owner_limits` runs at most
that many operations over all instances, and a table starts at most `max_runs_per_hour`
attempts (its policy, else `table_runs_per_hour`; 0 = unlimited) per hour, so one hot table
cannot take every slot. What these limits hold back stays SCHEDULED, and is left out before
the scan's `LIMIT`, so it never crowds out operations that may run. Within one claim the
queue ranks apply first, then the owner ranks among what fits its queue: a row its owner's
limit drops may have taken a queue's last slot, so a claim can take fewer than it might
(never more), and the next tick takes the rest.

Limits across instances must count rows another instance is claiming at the same moment,
which no snapshot can see. So claimers first take one transaction-scoped advisory lock and
claim one at a time (a claim takes milliseconds; commit right after it). SKIP LOCKED then
still keeps claims from waiting on rows that operators or jobs are changing. The partial
unique index `ux_operation_running_tbl` guards "one running operation per table" in the
database as well, so even a bug cannot start two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from tms.store.attempt_outcome import Lost, finish_attempt
from tms.store.models import Attempt, Operation, OperationStatus
from tms.store.retry import Backoff
from tms.store.transitions import clock

__all__ = [
    "CLAIM_LOCK_KEY",
    "Claim",
    "Reaped",
    "claim_due_operations",
    "extend_lease",
    "lock_scheduling",
    "reap_expired_leases",
]

CLAIM_LOCK_KEY = 0x746D735F636C6169  # "tms_clai"

# `now` is the database clock unless a caller (a test) pins it: one clock for all instances.
_NOW = "COALESCE(CAST(:now AS timestamptz), now())"

# The engine an operation asks for: its own unless `spark` (choose), else its table's
# policy `execution_engine`, else `spark`.
_ASKED = (
    "COALESCE(NULLIF(lower(o.engine), 'spark'), lower(ot.policy->>'execution_engine'), 'spark')"
)
# What a resident worker can run: no JVM of its own (resource, spark.* settings), and no
# storage options of the table's (they reach tasks through the SparkContext's environment,
# one set per application).
_WORKER_CAN_RUN = (
    "(o.resource IS NULL AND ot.storage_options = '{}'::jsonb AND NOT EXISTS ("
    "SELECT 1 FROM jsonb_object_keys(o.extra_params) k WHERE k LIKE 'spark.%'))"
)
# For a worker: what it can run, asked for `spark-worker` or left to choose, in its queues.
WORKER_FILTER = (
    f"{_ASKED} IN ('spark-worker', 'spark') AND {_WORKER_CAN_RUN} "
    "AND o.queue = ANY(CAST(:worker_queues AS text[]))"
)
# For the scheduler: everything else; an operation left to choose goes to a worker when
# one serves its queue (`worker_queues`: the queues of the workers alive).
SCHEDULER_FILTER = (
    f"NOT ({_WORKER_CAN_RUN} AND ({_ASKED} = 'spark-worker' OR ({_ASKED} = 'spark' "
    "AND o.queue = ANY(CAST(:worker_queues AS text[])))))"
)

# The attempts a table may start per hour: its policy's `max_runs_per_hour` when that is a
# JSON number, else the setting; 0 (or less) is unlimited. Numeric, so no value can overflow.
_RUNS_CAP = (
    "(CASE WHEN jsonb_typeof(ot.policy->'max_runs_per_hour') = 'number' "
    "THEN CAST(ot.policy->>'max_runs_per_hour' AS numeric) "
    "ELSE CAST(:table_runs_per_hour AS numeric) END)"
)

_CLAIM = f"""
WITH limits AS (
    SELECT q.queue, q.max_running
    FROM unnest(CAST(:queues AS text[]), CAST(:limits AS int[])) AS q(queue, max_running)
),
room AS (
    SELECT l.queue, l.max_running - count(r.id) AS free
    FROM limits l LEFT JOIN operation r ON r.queue = l.queue AND r.status = 'RUNNING'
    GROUP BY l.queue, l.max_running
),
owner_limits AS (
    SELECT q.owner, q.max_running
    FROM unnest(CAST(:owners AS text[]), CAST(:owner_limits AS int[])) AS q(owner, max_running)
),
running_owners AS (
    SELECT COALESCE(r.owner, rt.owner) AS owner
    FROM operation r JOIN tbl rt ON rt.id = r.tbl_id
    WHERE r.status = 'RUNNING'
),
owner_room AS (
    SELECT l.owner, l.max_running - count(r.owner) AS free
    FROM owner_limits l LEFT JOIN running_owners r ON r.owner = l.owner
    GROUP BY l.owner, l.max_running
),
-- Tables that started as many attempts in the hour before `now` as their cap allows. Read
-- once (a hashed lookup), and only when a candidate's table has a cap (the CASE below).
capped_tables AS MATERIALIZED (
    SELECT ot.id AS tbl_id
    FROM attempt a JOIN operation x ON x.id = a.operation_id JOIN tbl ot ON ot.id = x.tbl_id
    WHERE a.started_at > {_NOW} - interval '1 hour'
    GROUP BY ot.id
    HAVING {_RUNS_CAP} > 0 AND count(*) >= {_RUNS_CAP}
),
candidates AS (
    SELECT o.id, o.tbl_id, o.queue, COALESCE(o.owner, ot.owner) AS owner, o.priority,
           o.next_run_at
    FROM operation o JOIN tbl ot ON ot.id = o.tbl_id
    WHERE o.status = 'SCHEDULED' AND NOT o.is_deleted AND o.next_run_at <= {_NOW}
      AND {{engine_filter}}
      AND NOT EXISTS (
          SELECT 1 FROM operation r WHERE r.tbl_id = o.tbl_id AND r.status = 'RUNNING')
      AND NOT EXISTS (SELECT 1 FROM tbl t WHERE t.id = o.tbl_id AND t.paused)
      AND NOT EXISTS (SELECT 1 FROM room WHERE room.queue = o.queue AND room.free <= 0)
      AND NOT EXISTS (
          SELECT 1 FROM owner_room w
          WHERE w.owner = COALESCE(o.owner, ot.owner) AND w.free <= 0)
      AND CASE WHEN {_RUNS_CAP} <= 0 THEN true
               ELSE o.tbl_id NOT IN (SELECT c.tbl_id FROM capped_tables c) END
    ORDER BY o.priority DESC, o.next_run_at, o.id
    LIMIT :scan
    FOR UPDATE OF o SKIP LOCKED
),
first_of_table AS (
    SELECT c.*, row_number() OVER (
        PARTITION BY c.tbl_id ORDER BY c.priority DESC, c.next_run_at, c.id) AS table_rank
    FROM candidates c
),
ranked AS (
    SELECT f.*, row_number() OVER (
        PARTITION BY f.queue ORDER BY f.priority DESC, f.next_run_at, f.id) AS queue_rank
    FROM first_of_table f
    WHERE f.table_rank = 1
),
queue_fit AS (
    SELECT r.*, row_number() OVER (
        PARTITION BY r.owner ORDER BY r.priority DESC, r.next_run_at, r.id) AS owner_rank
    FROM ranked r LEFT JOIN room ON room.queue = r.queue
    WHERE room.free IS NULL OR r.queue_rank <= room.free
),
picked AS (
    SELECT p.id, nextval(pg_get_serial_sequence('attempt', 'id')) AS attempt_id
    FROM (
        SELECT f.id
        FROM queue_fit f LEFT JOIN owner_room w ON w.owner = f.owner
        WHERE w.free IS NULL OR f.owner_rank <= w.free
        ORDER BY f.priority DESC, f.next_run_at, f.id
        LIMIT :limit
    ) p
),
claimed AS (
    UPDATE operation o
    SET status = 'RUNNING',
        run_times = o.run_times + 1,
        current_attempt_id = p.attempt_id,
        lease_owner = :instance,
        lease_expires_at = {_NOW} + make_interval(secs => :lease),
        last_heartbeat_at = {_NOW},
        cancel_requested = false,
        updated_at = {_NOW}
    FROM picked p
    WHERE o.id = p.id
    RETURNING o.id, p.attempt_id
),
attempts AS (
    INSERT INTO attempt (id, operation_id, number, instance_id, started_at, outcome)
    SELECT c.attempt_id, c.id,
           COALESCE((SELECT max(a.number) FROM attempt a WHERE a.operation_id = c.id), 0) + 1,
           :instance, {_NOW}, 'RUNNING'
    FROM claimed c
    RETURNING id, operation_id
),
events AS (
    INSERT INTO operation_event (operation_id, attempt_id, from_status, to_status, at, reason)
    SELECT a.operation_id, a.id, 'SCHEDULED', 'RUNNING', {_NOW}, 'claimed by ' || :instance
    FROM attempts a
)
SELECT operation_id, id AS attempt_id FROM attempts
"""


@dataclass(frozen=True)
class Claim:
    """A claimed operation (now RUNNING, leased to the claimer) and its new attempt."""

    operation: Operation
    attempt: Attempt


@dataclass(frozen=True)
class Reaped:
    """An operation whose attempt was LOST: back to SCHEDULED, or FAILED/CANCELLED."""

    operation: Operation
    attempt: Attempt


def lock_scheduling(session: Session) -> None:
    """Serialise claimers (and table deletion) until the caller's transaction ends."""
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": CLAIM_LOCK_KEY})


def claim_due_operations(
    session: Session,
    instance_id: str,
    *,
    limit: int,
    queue_limits: Mapping[str, int] | None = None,
    lease_seconds: float,
    now: datetime | None = None,
    worker_queues: Sequence[str] = (),
    for_worker: bool = False,
    owner_limits: Mapping[str, int] | None = None,
    table_runs_per_hour: int = 0,
) -> list[Claim]:
    """Claim up to `limit` due operations for `instance_id`, highest priority then oldest.

    Skips paused tables, tables with a running operation, queues whose running count
    (over all instances) reached `queue_limits[queue]`, owners whose running count reached
    `owner_limits[owner]` (unlisted queues and owners are unlimited), and tables that
    started their hourly cap of attempts in the hour before `now` (policy
    `max_runs_per_hour`, else `table_runs_per_hour`; 0 = unlimited).
    `for_worker`: only what a resident worker can run in `worker_queues` (its queues);
    else (the scheduler, for spark-submit) the rest, `worker_queues` being those that live
    workers serve. Caller: compute `limit` from the free slots and commit promptly.
    """
    if limit <= 0:
        return []
    queue_limits = queue_limits or {}
    owner_limits = owner_limits or {}
    lock_scheduling(session)
    engine_filter = WORKER_FILTER if for_worker else SCHEDULER_FILTER
    rows = session.execute(
        text(_CLAIM.format(engine_filter=engine_filter)),
        {
            "worker_queues": list(worker_queues),
            "queues": list(queue_limits),
            "limits": list(queue_limits.values()),
            "owners": list(owner_limits),
            "owner_limits": list(owner_limits.values()),
            "table_runs_per_hour": table_runs_per_hour,
            # Extra rows let the per-table, per-queue and per-owner ranks still fill `limit`.
            "scan": limit * 4 + 16,
            "limit": limit,
            "instance": instance_id,
            "lease": float(lease_seconds),
            "now": now,
        },
    ).all()
    if not rows:
        return []
    operations = _load(session, Operation, [r.operation_id for r in rows])
    attempts = _load(session, Attempt, [r.attempt_id for r in rows])
    claims = [Claim(operations[r.operation_id], attempts[r.attempt_id]) for r in rows]
    claims.sort(key=lambda c: (-c.operation.priority, c.operation.next_run_at, c.operation.id))
    return claims


def extend_lease(
    session: Session,
    attempt: Attempt,
    *,
    lease_seconds: float,
    now: datetime | None = None,
) -> Operation | None:
    """Heartbeat: extend the lease if `attempt` still holds it; None means it was lost (the
    job should stop). The returned operation's `cancel_requested` tells the job to cancel."""
    stmt = (
        update(Operation)
        .where(
            Operation.id == attempt.operation_id,
            Operation.current_attempt_id == attempt.id,
            Operation.status == OperationStatus.RUNNING,
        )
        .values(
            lease_expires_at=text(f"{_NOW} + make_interval(secs => :lease)"),
            last_heartbeat_at=text(_NOW),
        )
        .returning(Operation)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    return session.scalars(stmt, {"now": now, "lease": float(lease_seconds)}).one_or_none()


def reap_expired_leases(
    session: Session,
    *,
    backoff: Backoff,
    now: datetime | None = None,
    limit: int = 100,
) -> list[Reaped]:
    """Mark attempts whose lease expired LOST, up to `limit` at a time (oldest expiry first;
    rows another transaction holds are skipped, not waited on).

    Each operation goes back to SCHEDULED after a backoff delay while it has retries left
    (a lost attempt counts as one), to FAILED when it has none, and to CANCELLED if a
    cancellation was requested. The caller rolls back what the lost attempt left on storage.
    """
    expired = session.execute(
        select(Operation.id, Operation.current_attempt_id)
        .where(
            Operation.status == OperationStatus.RUNNING,
            Operation.lease_expires_at < clock(now),
            Operation.current_attempt_id.is_not(None),
        )
        .order_by(Operation.lease_expires_at, Operation.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    reaped: list[Reaped] = []
    for row in expired:
        attempt = session.get_one(Attempt, row.current_attempt_id, populate_existing=True)
        finished = finish_attempt(session, attempt, Lost(), backoff=backoff, now=now)
        if finished is not None:
            reaped.append(Reaped(finished.operation, finished.attempt))
    return reaped


_Row = TypeVar("_Row", Operation, Attempt)


def _load(session: Session, model: type[_Row], ids: list[int]) -> dict[int, _Row]:
    stmt = select(model).where(model.id.in_(ids)).execution_options(populate_existing=True)
    return {row.id: row for row in session.scalars(stmt)}
