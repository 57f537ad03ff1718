from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import claim, db_now, make_op, make_table
from tms.store import (
    AttemptOutcome,
    Operation,
    OperationStatus,
    ServiceAction,
    extend_lease,
    get_operation,
    list_attempts,
    list_events,
    update_table,
)

S = OperationStatus


def test_claim_sets_running_lease_attempt_and_event(session: Session) -> None:
    table = make_table(session)
    op = make_op(session, table)
    now = db_now(session)
    (c,) = claim(session, instance="node-a", lease_seconds=30)
    assert c.operation.id == op.id
    assert (c.operation.status, c.operation.run_times, c.operation.lease_owner) == (
        S.RUNNING,
        1,
        "node-a",
    )
    assert c.operation.lease_expires_at == now + timedelta(seconds=30)
    assert c.operation.current_attempt_id == c.attempt.id
    assert (c.attempt.number, c.attempt.instance_id, c.attempt.outcome) == (
        1,
        "node-a",
        AttemptOutcome.RUNNING,
    )
    assert [(e.from_status, e.to_status, e.attempt_id) for e in list_events(session, op.id)] == [
        (None, S.SCHEDULED, None),
        (S.SCHEDULED, S.RUNNING, c.attempt.id),
    ]
    assert claim(session) == []


def test_claim_order_is_priority_then_due_time_then_id(session: Session) -> None:
    tables = [make_table(session, f"t{i}") for i in range(5)]
    low_old = make_op(session, tables[0], priority=0, run_at=timedelta(minutes=-10))
    high_new = make_op(session, tables[1], priority=5, run_at=timedelta(minutes=-1))
    high_old = make_op(session, tables[2], priority=5, run_at=timedelta(minutes=-5))
    low_new_a = make_op(session, tables[3], priority=0)
    low_new_b = make_op(session, tables[4], priority=0)
    claimed = [c.operation.id for c in claim(session, limit=4)]
    assert claimed == [high_old.id, high_new.id, low_old.id, low_new_a.id]
    assert [c.operation.id for c in claim(session)] == [low_new_b.id]


def test_claim_skips_not_due_and_paused_tables(session: Session) -> None:
    due_later = make_op(session, make_table(session, "a"), run_at=timedelta(minutes=5))
    paused = make_table(session, "b")
    make_op(session, paused)
    update_table(session, paused.id, paused=True)
    assert claim(session) == []
    assert [c.operation.id for c in claim(session, now=db_now(session) + timedelta(minutes=6))] == [
        due_later.id
    ]


def test_one_running_operation_per_table(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        table, other = make_table(session, "t"), make_table(session, "u")
        ops = [make_op(session, table, a) for a in (ServiceAction.COMPACTION, ServiceAction.CLEAN)]
        other_op = make_op(session, other)
    with factory.begin() as session:  # in one batch: the first of each table only
        assert sorted(c.operation.id for c in claim(session)) == [ops[0].id, other_op.id]
    with factory.begin() as session:  # in a later batch: not while one runs
        assert claim(session) == []
    with factory() as session, pytest.raises(IntegrityError, match="ux_operation_running_tbl"):
        # The database enforces it too, whatever the code does.
        session.execute(
            update(Operation)
            .where(Operation.id == ops[1].id)
            .values(
                status=S.RUNNING,
                lease_owner="x",
                lease_expires_at=text("now()"),
                current_attempt_id=1,
            )
        )


def test_queue_limits(session: Session) -> None:
    tables = [make_table(session, f"t{i}") for i in range(8)]
    etl = [make_op(session, t, queue="etl") for t in tables[:4]]
    adhoc = [make_op(session, t, queue="adhoc") for t in tables[4:6]]
    free = [make_op(session, t, queue="free") for t in tables[6:]]
    limits = {"etl": 2, "adhoc": 0}

    first = {c.operation.id for c in claim(session, limit=3, queue_limits=limits)}
    assert first == {etl[0].id, etl[1].id, free[0].id}
    second = {c.operation.id for c in claim(session, limit=10, queue_limits=limits)}
    assert second == {free[1].id}  # etl is full, adhoc is paused (0)
    # Unlisted queues are unlimited.
    third = {c.operation.id for c in claim(session, limit=10, queue_limits={"etl": 3})}
    assert third == {etl[2].id} | {o.id for o in adhoc}
    assert [c.operation.id for c in claim(session, limit=10)] == [etl[3].id]


def test_skip_locked_rows_without_waiting(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        locked = make_op(session, make_table(session, "a"))
        free = make_op(session, make_table(session, "b"))
    with factory() as holder, factory() as claimer:
        holder.execute(select(Operation).where(Operation.id == locked.id).with_for_update())
        claimer.execute(text("SET LOCAL lock_timeout = '2s'"))  # fail instead of waiting
        assert [c.operation.id for c in claim(claimer)] == [free.id]
        claimer.commit()
        holder.rollback()
    with factory.begin() as session:
        assert [c.operation.id for c in claim(session)] == [locked.id]


def test_concurrent_claimers_never_share_an_operation(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        tables = [make_table(session, f"t{i}") for i in range(12)]
        ops = {
            make_op(session, t, a).id
            for t in tables
            for a in (ServiceAction.COMPACTION, ServiceAction.CLEAN)
        }
    claimed: dict[str, list[int]] = {"a": [], "b": []}
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            barrier.wait()
            for _ in range(40):
                with factory.begin() as session:
                    batch = claim(session, limit=2, instance=name, queue_limits={"default": 5})
                    claimed[name].extend(c.operation.id for c in batch)
                    running = session.scalars(
                        select(Operation).where(Operation.status == S.RUNNING)
                    ).all()
                    assert len(running) <= 5
                # Finish what we claimed so other operations of the tables become claimable.
                with factory.begin() as session:
                    session.execute(
                        update(Operation)
                        .where(Operation.lease_owner == name, Operation.status == S.RUNNING)
                        .values(
                            status=S.COMPLETED,
                            lease_owner=None,
                            lease_expires_at=None,
                            current_attempt_id=None,
                        )
                    )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    every = claimed["a"] + claimed["b"]
    assert len(every) == len(set(every)), "an operation was claimed twice"
    assert set(every) == ops


def test_extend_lease_only_for_the_current_attempt(session: Session) -> None:
    op = make_op(session, make_table(session))
    (c,) = claim(session, lease_seconds=10)
    later = db_now(session) + timedelta(seconds=5)
    extended = extend_lease(session, c.attempt, lease_seconds=60, now=later)
    assert extended is not None and extended.id == op.id
    assert extended.lease_expires_at == later + timedelta(seconds=60)
    assert extended.last_heartbeat_at == later
    assert not extended.cancel_requested

    session.execute(update(Operation).where(Operation.id == op.id).values(current_attempt_id=-1))
    assert extend_lease(session, c.attempt, lease_seconds=60) is None
    assert get_operation(session, op.id).status is S.RUNNING
    assert [a.id for a in list_attempts(session, op.id)] == [c.attempt.id]
