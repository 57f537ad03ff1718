"""Claiming due operations and extending leases (the leases that expired: `store.leases`).

Claims are one statement (see `_claim`): lock due rows with `FOR UPDATE SKIP LOCKED` in
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
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

from sqlalchemy import (
    CTE,
    BigInteger,
    ColumnElement,
    FromClause,
    Integer,
    Numeric,
    Select,
    Text,
    and_,
    any_,
    case,
    cast,
    exists,
    func,
    insert,
    literal,
    not_,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Session

from tms.store.cancelled_plans import still_to_abort
from tms.store.models import (
    ATTEMPT_OUTCOME,
    OPERATION_STATUS,
    Attempt,
    AttemptOutcome,
    Operation,
    OperationEvent,
    OperationStatus,
    Tbl,
)
from tms.store.transitions import clock

__all__ = [
    "CLAIM_LOCK_KEY",
    "Claim",
    "claim_due_operations",
    "extend_lease",
    "lock_scheduling",
]

CLAIM_LOCK_KEY = 0x746D735F636C6169  # "tms_clai"

RUNNING = OperationStatus.RUNNING
SCHEDULED = OperationStatus.SCHEDULED


def _asked(o: FromClause, ot: FromClause) -> ColumnElement[str]:
    """The engine an operation asks for: its own unless `spark` (choose), else its table's
    policy `execution_engine`, else `spark`."""
    return func.coalesce(
        func.nullif(func.lower(o.c.engine), "spark"),
        func.lower(ot.c.policy["execution_engine"].astext),
        "spark",
    )


def _worker_can_run(o: FromClause, ot: FromClause) -> ColumnElement[bool]:
    """What a resident worker can run: no JVM of its own (resource, spark.* settings), and
    no storage options of the table's (they reach tasks through the SparkContext's
    environment, one set per application)."""
    key = func.jsonb_object_keys(o.c.extra_params).column_valued("k")
    return and_(
        o.c.resource.is_(None),
        ot.c.storage_options == literal({}, JSONB),
        not_(exists().where(key.like("spark.%"))),
    )


def engine_filter(
    o: FromClause, ot: FromClause, *, for_worker: bool, worker_queues: Sequence[str]
) -> ColumnElement[bool]:
    """For a worker: what it can run, asked for `spark-worker` or left to choose, in its
    queues (`worker_queues`). For the scheduler: everything else; an operation left to
    choose goes to a worker when one serves its queue (`worker_queues`: the queues of the
    workers alive)."""
    asked = _asked(o, ot)
    served = o.c.queue == any_(literal(list(worker_queues), ARRAY(Text)))
    if for_worker:
        return and_(asked.in_(["spark-worker", "spark"]), _worker_can_run(o, ot), served)
    return not_(
        and_(
            _worker_can_run(o, ot),
            or_(asked == "spark-worker", and_(asked == "spark", served)),
        )
    )


def _runs_cap(ot: FromClause, table_runs_per_hour: int) -> ColumnElement[Decimal]:
    """The attempts a table may start per hour: its policy's `max_runs_per_hour` when that
    is a JSON number, else the setting; 0 (or less) is unlimited. Numeric, so no value can
    overflow."""
    own = ot.c.policy["max_runs_per_hour"]
    return case(
        (func.jsonb_typeof(own) == "number", cast(own.astext, Numeric)),
        else_=cast(literal(table_runs_per_hour), Numeric),
    )


def _limits(names: Sequence[str], limits: Sequence[int], name: str) -> FromClause:
    """`unnest(names, limits) AS q(<name>, max_running)`: a limit per queue or owner."""
    return (
        func.unnest(literal(list(names), ARRAY(Text)), literal(list(limits), ARRAY(Integer)))
        .table_valued(name, "max_running")
        .render_derived(name="q")
    )


def _claim(
    *,
    instance: str,
    limit: int,
    lease_seconds: float,
    queue_limits: Mapping[str, int],
    owner_limits: Mapping[str, int],
    table_runs_per_hour: int,
    worker_queues: Sequence[str],
    for_worker: bool,
    now: ColumnElement[datetime],
) -> Select[tuple[int, int]]:
    """The claim as one statement (see the module doc); rows: (operation id, attempt id)."""
    running = Operation.__table__.alias("r")
    room = _queue_room(queue_limits, running)
    owner_room = _owner_room(owner_limits, running)
    candidates = _candidates(
        limit=limit,
        room=room,
        owner_room=owner_room,
        capped=_capped_tables(table_runs_per_hour, now),
        table_runs_per_hour=table_runs_per_hour,
        worker_queues=worker_queues,
        for_worker=for_worker,
        running=running,
        now=now,
    )
    picked = _picked(candidates, room, owner_room, limit)
    return _claimed(picked, instance=instance, lease_seconds=lease_seconds, now=now)


def _queue_room(queue_limits: Mapping[str, int], running: FromClause) -> CTE:
    """`room(queue, free)`: the operations each limited queue may still start."""
    q = _limits(list(queue_limits), list(queue_limits.values()), "queue")
    limits = select(q.c.queue, q.c.max_running).cte("limits")
    r = running
    return (
        select(limits.c.queue, (limits.c.max_running - func.count(r.c.id)).label("free"))
        .select_from(limits.outerjoin(r, and_(r.c.queue == limits.c.queue, r.c.status == RUNNING)))
        .group_by(limits.c.queue, limits.c.max_running)
        .cte("room")
    )


def _owner_room(owner_limits: Mapping[str, int], running: FromClause) -> CTE:
    """`owner_room(owner, free)`: the operations each limited owner may still start (an
    operation's owner, else its table's)."""
    w = _limits(list(owner_limits), list(owner_limits.values()), "owner")
    owners = select(w.c.owner, w.c.max_running).cte("owner_limits")
    r, rt = running, Tbl.__table__.alias("rt")
    running_owners = (
        select(func.coalesce(r.c.owner, rt.c.owner).label("owner"))
        .join_from(r, rt, rt.c.id == r.c.tbl_id)
        .where(r.c.status == RUNNING)
        .cte("running_owners")
    )
    return (
        select(
            owners.c.owner,
            (owners.c.max_running - func.count(running_owners.c.owner)).label("free"),
        )
        .select_from(owners.outerjoin(running_owners, running_owners.c.owner == owners.c.owner))
        .group_by(owners.c.owner, owners.c.max_running)
        .cte("owner_room")
    )


def _capped_tables(table_runs_per_hour: int, now: ColumnElement[datetime]) -> CTE:
    """Tables that started as many attempts in the hour before `now` as their cap allows.
    Read once (a hashed lookup), and only when a candidate's table has a cap (the CASE in
    `_candidates`)."""
    a = Attempt.__table__.alias("a")
    x, ct = Operation.__table__.alias("x"), Tbl.__table__.alias("ct")
    return (
        select(ct.c.id.label("tbl_id"))
        .select_from(a.join(x, x.c.id == a.c.operation_id).join(ct, ct.c.id == x.c.tbl_id))
        .where(a.c.started_at > now - timedelta(hours=1))
        .group_by(ct.c.id)
        .having(
            and_(
                _runs_cap(ct, table_runs_per_hour) > 0,
                func.count() >= _runs_cap(ct, table_runs_per_hour),
            )
        )
        .cte("capped_tables")
        .prefix_with("MATERIALIZED")
    )


def _candidates(
    *,
    limit: int,
    room: CTE,
    owner_room: CTE,
    capped: CTE,
    table_runs_per_hour: int,
    worker_queues: Sequence[str],
    for_worker: bool,
    running: FromClause,
    now: ColumnElement[datetime],
) -> CTE:
    """Due operations this claimer may run, locked (`SKIP LOCKED`), best first: none of a
    table with a running operation or paused, none that would plan while a cancelled plan of
    its table and service is still to abort, none of a full queue or owner, or of a capped
    table."""
    o, ot, pt = Operation.__table__.alias("o"), Tbl.__table__.alias("ot"), Tbl.__table__.alias("t")
    ab = Operation.__table__.alias("ab")
    r = running
    owner = func.coalesce(o.c.owner, ot.c.owner)
    return (
        select(o.c.id, o.c.tbl_id, o.c.queue, owner.label("owner"), o.c.priority, o.c.next_run_at)
        .join_from(o, ot, ot.c.id == o.c.tbl_id)
        .where(
            o.c.status == SCHEDULED,
            not_(o.c.is_deleted),
            o.c.next_run_at <= now,
            engine_filter(o, ot, for_worker=for_worker, worker_queues=worker_queues),
            not_(exists().where(r.c.tbl_id == o.c.tbl_id, r.c.status == RUNNING)),
            not_(exists().where(pt.c.id == o.c.tbl_id, pt.c.paused)),
            # one that would plan while a cancelled plan of its table and service is still to
            # abort: that plan holds file groups the new one would plan around
            or_(
                o.c.instant.is_not(None),
                not_(
                    exists().where(
                        ab.c.tbl_id == o.c.tbl_id, ab.c.action == o.c.action, still_to_abort(ab)
                    )
                ),
            ),
            not_(exists().where(room.c.queue == o.c.queue, room.c.free <= 0)),
            not_(exists().where(owner_room.c.owner == owner, owner_room.c.free <= 0)),
            case(
                (_runs_cap(ot, table_runs_per_hour) <= 0, true()),
                else_=o.c.tbl_id.not_in(select(capped.c.tbl_id)),
            ),
        )
        .order_by(o.c.priority.desc(), o.c.next_run_at, o.c.id)
        # Extra rows let the per-table, per-queue and per-owner ranks still fill `limit`.
        .limit(limit * 4 + 16)
        .with_for_update(of=o, skip_locked=True)
        .cte("candidates")
    )


def _picked(candidates: CTE, room: CTE, owner_room: CTE, limit: int) -> CTE:
    """`picked(id, attempt_id)`: at most `limit` candidates, one per table, as many per queue
    and per owner as their room, each with the id of its new attempt."""
    c = candidates.c
    first_of_table = select(candidates, _rank(c.tbl_id, candidates).label("table_rank")).cte(
        "first_of_table"
    )
    f = first_of_table.c
    ranked = (
        select(first_of_table, _rank(f.queue, first_of_table).label("queue_rank"))
        .where(f.table_rank == 1)
        .cte("ranked")
    )
    queue_fit = (
        select(ranked, _rank(ranked.c.owner, ranked).label("owner_rank"))
        .select_from(ranked.outerjoin(room, room.c.queue == ranked.c.queue))
        .where(or_(room.c.free.is_(None), ranked.c.queue_rank <= room.c.free))
        .cte("queue_fit")
    )
    fit = queue_fit.c
    p = (
        select(fit.id)
        .select_from(queue_fit.outerjoin(owner_room, owner_room.c.owner == fit.owner))
        .where(or_(owner_room.c.free.is_(None), fit.owner_rank <= owner_room.c.free))
        .order_by(fit.priority.desc(), fit.next_run_at, fit.id)
        .limit(limit)
        .subquery("p")
    )
    attempt_id = func.nextval(func.pg_get_serial_sequence("attempt", "id"))
    return select(p.c.id, attempt_id.label("attempt_id")).cte("picked")


def _claimed(
    picked: CTE, *, instance: str, lease_seconds: float, now: ColumnElement[datetime]
) -> Select[tuple[int, int]]:
    """The picked operations RUNNING and leased to `instance`, each with its attempt and its
    event; rows: (operation id, attempt id)."""
    claimed = (
        update(Operation)
        .where(Operation.id == picked.c.id)
        .values(
            status=RUNNING,
            run_times=Operation.run_times + 1,
            current_attempt_id=picked.c.attempt_id,
            lease_owner=instance,
            lease_expires_at=now + timedelta(seconds=lease_seconds),
            last_heartbeat_at=now,
            cancel_requested=False,
            updated_at=now,
        )
        .returning(Operation.id, picked.c.attempt_id)
        .cte("claimed")
    )
    earlier = Attempt.__table__.alias("e")
    number = select(func.max(earlier.c.number)).where(earlier.c.operation_id == claimed.c.id)
    attempts = (
        insert(Attempt)
        .from_select(
            ["id", "operation_id", "number", "instance_id", "started_at", "outcome"],
            select(
                claimed.c.attempt_id,
                claimed.c.id,
                func.coalesce(number.scalar_subquery(), 0) + 1,
                literal(instance),
                now,
                literal(AttemptOutcome.RUNNING, ATTEMPT_OUTCOME),
            ),
        )
        .returning(Attempt.id, Attempt.operation_id)
        .cte("attempts")
    )
    events = insert(OperationEvent).from_select(
        ["operation_id", "attempt_id", "from_status", "to_status", "at", "reason"],
        select(
            attempts.c.operation_id,
            attempts.c.id,
            literal(SCHEDULED, OPERATION_STATUS),
            literal(RUNNING, OPERATION_STATUS),
            now,
            literal(f"claimed by {instance}"),
        ),
    )
    return select(attempts.c.operation_id, attempts.c.id.label("attempt_id")).add_cte(
        events.cte("events")
    )


def _rank(partition: ColumnElement[Any], rows: FromClause) -> ColumnElement[int]:
    """The row's place within `partition`: highest priority, then oldest due time, then id."""
    return func.row_number().over(
        partition_by=partition, order_by=(rows.c.priority.desc(), rows.c.next_run_at, rows.c.id)
    )


@dataclass(frozen=True)
class Claim:
    """A claimed operation (now RUNNING, leased to the claimer) and its new attempt."""

    operation: Operation
    attempt: Attempt


def lock_scheduling(session: Session) -> None:
    """Serialise claimers (and table deletion) until the caller's transaction ends."""
    session.execute(select(func.pg_advisory_xact_lock(literal(CLAIM_LOCK_KEY, BigInteger))))


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

    Skips paused tables, tables with a running operation, operations that would plan while
    a cancelled plan of their table and action is still to abort (`store.cancelled_plans`),
    queues whose running count (over all instances) reached `queue_limits[queue]`, owners
    whose running count reached
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
    rows = session.execute(
        _claim(
            instance=instance_id,
            limit=limit,
            lease_seconds=float(lease_seconds),
            queue_limits=queue_limits,
            owner_limits=owner_limits,
            table_runs_per_hour=table_runs_per_hour,
            worker_queues=worker_queues,
            for_worker=for_worker,
            now=clock(now),
        )
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
            lease_expires_at=clock(now) + timedelta(seconds=lease_seconds),
            last_heartbeat_at=clock(now),
        )
        .returning(Operation)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    return session.scalars(stmt).one_or_none()


_Row = TypeVar("_Row", Operation, Attempt)


def _load(session: Session, model: type[_Row], ids: list[int]) -> dict[int, _Row]:
    stmt = select(model).where(model.id.in_(ids)).execution_options(populate_existing=True)
    return {row.id: row for row in session.scalars(stmt)}
