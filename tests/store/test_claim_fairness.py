"""Fairness in the claim: per-owner limits of running operations over all instances, and a
cap on the attempts one table starts per hour. What they hold back stays SCHEDULED and is
claimed once there is room; the scheduler and resident workers obey the same limits."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import db_now, make_op, make_table
from tms.application.attempt_end import Completed, finish_attempt
from tms.backoff import Backoff
from tms.store import (
    Attempt,
    Operation,
    OperationStatus,
    Tbl,
    claim_due_operations,
    claim_worker_operations,
    get_operation,
    register_worker,
    session_scope,
    worker_seen,
)

S = OperationStatus
NO_JITTER = Backoff(base_seconds=5, factor=2, max_seconds=600, jitter=0)


def _claim(
    session: Session,
    *,
    instance: str = "i1",
    limit: int = 10,
    owners: Mapping[str, int] | None = None,
    runs_per_hour: int = 0,
    now: datetime | None = None,
) -> list[int]:
    claims = claim_due_operations(
        session,
        instance,
        limit=limit,
        lease_seconds=600,
        now=now,
        owner_limits=owners,
        table_runs_per_hour=runs_per_hour,
    )
    return sorted(c.operation.id for c in claims)


def _finish(session: Session, operation_id: int) -> None:
    """The running attempt of `operation_id` succeeds (its operation is COMPLETED)."""
    operation = get_operation(session, operation_id)
    attempt = operation.current_attempt_id
    assert attempt is not None
    done = finish_attempt(
        session, session.get_one(Attempt, attempt), Completed(), backoff=NO_JITTER
    )
    assert done is not None and done.operation.status is S.COMPLETED


def _running_of(session: Session, owner: str) -> int:
    stmt = (
        select(func.count())
        .select_from(Operation)
        .join(Tbl, Tbl.id == Operation.tbl_id)
        .where(Operation.status == S.RUNNING, func.coalesce(Operation.owner, Tbl.owner) == owner)
    )
    return session.scalar(stmt) or 0


def _status(session: Session, operation_id: int) -> OperationStatus:
    return get_operation(session, operation_id).status


def test_an_owner_limit_holds_across_instances_until_one_finishes(
    factory: sessionmaker[Session],
) -> None:
    limits = {"team-a": 2}
    with session_scope(factory) as s:
        mine = [
            make_op(s, make_table(s, f"a{i}", owner="team-a"), priority=9 - i) for i in range(3)
        ]
        # The operation's owner wins over its table's.
        borrowed = make_op(s, make_table(s, "b0", owner="team-b"), owner="team-a", priority=1)
        theirs = make_op(s, make_table(s, "b1", owner="team-b"))
        nobody = make_op(s, make_table(s, "n0"))
    with session_scope(factory) as s:  # one claim: at most the limit, highest priority first
        assert _claim(s, instance="i1", owners=limits) == sorted(
            [mine[0].id, mine[1].id, theirs.id, nobody.id]
        )
    with session_scope(factory) as s:  # another instance sees the owner full
        assert _claim(s, instance="i2", owners=limits) == []
        assert _running_of(s, "team-a") == 2
        assert (_status(s, mine[2].id), _status(s, borrowed.id)) == (S.SCHEDULED, S.SCHEDULED)
    with session_scope(factory) as s:
        _finish(s, mine[0].id)
    with session_scope(factory) as s:
        assert _claim(s, instance="i2", owners=limits) == [mine[2].id]
    with session_scope(factory) as s:
        assert _claim(s, instance="i1", owners=limits) == []
        _finish(s, mine[1].id)
        _finish(s, mine[2].id)
    with session_scope(factory) as s:
        assert _claim(s, instance="i1", owners=limits) == [borrowed.id]


def test_concurrent_claimers_never_exceed_an_owner_limit(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as s:
        ops = {make_op(s, make_table(s, f"t{i}", owner="team-a")).id for i in range(10)}
    claimed: dict[str, list[int]] = {"i1": [], "i2": []}
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def claimer(name: str) -> None:
        try:
            barrier.wait()
            for _ in range(20):
                with session_scope(factory) as s:
                    batch = _claim(s, instance=name, limit=3, owners={"team-a": 3})
                    claimed[name].extend(batch)
                with session_scope(factory) as s:
                    assert _running_of(s, "team-a") <= 3
                    for op_id in batch:
                        _finish(s, op_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    every = claimed["i1"] + claimed["i2"]
    assert sorted(every) == sorted(ops), "each claimed once, all claimed in the end"


def test_unlisted_owners_are_unlimited_and_a_zero_limit_holds(session: Session) -> None:
    held = [make_op(session, make_table(session, f"a{i}", owner="team-a")) for i in range(2)]
    free = [make_op(session, make_table(session, f"b{i}", owner="team-b")) for i in range(3)]
    nobody = make_op(session, make_table(session, "n"))
    assert _claim(session, owners={"team-a": 0}) == sorted([*(o.id for o in free), nobody.id])
    assert [_status(session, o.id) for o in held] == [S.SCHEDULED, S.SCHEDULED]
    assert _claim(session, owners={"team-a": 0}) == []
    assert _claim(session, owners={"team-a": 5}) == sorted(o.id for o in held)


def test_a_table_at_its_hourly_cap_waits_while_others_run(session: Session) -> None:
    t0 = db_now(session)
    hot = make_table(session, "hot", policy={"max_runs_per_hour": 2})
    cold = make_table(session, "cold")
    for minutes in (0, 10):  # two starts within the hour
        op = make_op(session, hot)
        assert _claim(session, now=t0 + timedelta(minutes=minutes)) == [op.id]
        _finish(session, op.id)
    third = make_op(session, hot, priority=9)
    other = make_op(session, cold)
    assert _claim(session, now=t0 + timedelta(minutes=20)) == [other.id]
    assert _status(session, third.id) is S.SCHEDULED
    # Still two starts in the hour before 59 minutes; one after 61 (the first is older).
    assert _claim(session, now=t0 + timedelta(minutes=59)) == []
    assert _claim(session, now=t0 + timedelta(minutes=61)) == [third.id]


def test_the_table_policy_overrides_the_setting(session: Session) -> None:
    t0 = db_now(session)
    tables = {
        "default": make_table(session, "default"),
        "more": make_table(session, "more", policy={"max_runs_per_hour": 3}),
        "unlimited": make_table(session, "unlimited", policy={"max_runs_per_hour": 0}),
        "not-a-number": make_table(session, "nan", policy={"max_runs_per_hour": "5"}),
    }
    runs = dict.fromkeys(tables, 0)
    pending = {name: make_op(session, t) for name, t in tables.items()}
    for minute in range(5):
        claimed = _claim(session, runs_per_hour=1, now=t0 + timedelta(minutes=minute))
        for name, op in pending.items():
            if op.id in claimed:
                runs[name] += 1
                _finish(session, op.id)
                pending[name] = make_op(session, tables[name])
    assert runs == {"default": 1, "more": 3, "unlimited": 5, "not-a-number": 1}
    assert _status(session, pending["default"].id) is S.SCHEDULED


def test_a_worker_claim_obeys_the_same_limits(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as s:
        register_worker(
            s, "w1", host="h", pid=1, spark_master="local[2]", queues=["default"], slots=4
        )
        by_submit = make_op(s, make_table(s, "a0", owner="team-a"), engine="spark-submit")
        by_worker = make_op(s, make_table(s, "a1", owner="team-a"))
        capped = make_table(s, "capped", policy={"max_runs_per_hour": 1})
        first = make_op(s, capped)
    with session_scope(factory) as s:  # the scheduler runs team-a's first operation
        claims = claim_due_operations(
            s,
            "i1",
            limit=10,
            lease_seconds=60,
            worker_queues=["default"],  # what is left to choose goes to the worker
            owner_limits={"team-a": 1},
        )
        assert [c.operation.id for c in claims] == [by_submit.id]

    def worker_claims() -> list[int]:
        with session_scope(factory) as s:
            worker = worker_seen(s, "w1", busy=0)
            assert worker is not None
            claims = claim_worker_operations(
                s,
                worker,
                limit=4,
                queue_limits=None,
                lease_seconds=60,
                owner_limits={"team-a": 1},
                table_runs_per_hour=0,
            )
            return sorted(c.operation.id for c in claims)

    assert worker_claims() == [first.id], "team-a is full whoever runs its operation"
    with session_scope(factory) as s:
        _finish(s, first.id)
        second = make_op(s, capped)
    assert worker_claims() == [], "team-a is full, and the capped table started once this hour"
    with session_scope(factory) as s:
        _finish(s, by_submit.id)
        assert _status(s, second.id) is S.SCHEDULED
    assert worker_claims() == [by_worker.id]
