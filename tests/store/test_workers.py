"""Which engine runs an operation: a resident worker claims what it can run in its queues
(left to choose, or asking for `spark-worker`); the scheduler claims the rest for
spark-submit (why a worker did not take one is `application.chosen_engine`'s)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import make_op, make_table
from tms.store import (
    Operation,
    Worker,
    claim_due_operations,
    claim_worker_operations,
    get_attempt,
    list_workers,
    live_worker_queues,
    register_table,
    register_worker,
    remove_worker,
    session_scope,
    worker_seen,
)

ALIVE = timedelta(seconds=30)


def _worker(
    session: Session, worker_id: str = "w1", queues: tuple[str, ...] = ("default",)
) -> Worker:
    return register_worker(
        session, worker_id, host="h", pid=1, spark_master="local[2]", queues=queues, slots=2
    )


def _scheduler_claims(session: Session) -> list[int]:
    queues = live_worker_queues(session, within=ALIVE)
    claims = claim_due_operations(session, "i1", limit=10, lease_seconds=60, worker_queues=queues)
    return sorted(c.operation.id for c in claims)


def _worker_claims(session: Session, worker: Worker) -> list[int]:
    claims = claim_worker_operations(session, worker, limit=10, queue_limits=None, lease_seconds=60)
    return sorted(c.operation.id for c in claims)


def test_a_live_worker_takes_what_it_can_run_and_the_scheduler_the_rest(
    factory: sessionmaker[Session],
) -> None:
    with session_scope(factory) as s:
        worker = _worker(s)
        left = make_op(s, make_table(s, "left"))
        asked = make_op(s, make_table(s, "asked"), engine="spark-worker")
        submit = make_op(s, make_table(s, "submit"), engine="spark-submit")
        sized = make_op(s, make_table(s, "sized"), resource="4g:4g")
        tuned = make_op(s, make_table(s, "tuned"), extra_params={"spark.executor.cores": "2"})
        etl = make_op(s, make_table(s, "etl"), queue="etl")
        by_policy = make_op(
            s,
            register_table(
                s,
                db_name="db",
                table_name="policy",
                base_path="/data/policy",
                policy={"execution_engine": "spark-submit"},
            ).table,
        )
        secret = make_op(
            s,
            register_table(
                s,
                db_name="db",
                table_name="secret",
                base_path="/data/secret",
                storage_options={"key": "k"},
            ).table,
        )
    with session_scope(factory) as s:
        assert _scheduler_claims(s) == sorted(
            [submit.id, sized.id, tuned.id, etl.id, by_policy.id, secret.id]
        )
    with session_scope(factory) as s:
        assert _worker_claims(s, worker) == sorted([left.id, asked.id])
        for op_id in (left.id, asked.id):
            attempt = get_attempt(s, s.get_one(Operation, op_id).current_attempt_id or 0)
            assert (attempt.engine, attempt.worker_id) == ("spark-worker", "w1")


def test_without_a_live_worker_the_scheduler_takes_what_is_left_to_choose(
    factory: sessionmaker[Session],
) -> None:
    with session_scope(factory) as s:
        _worker(s)
        s.execute(update(Worker).values(last_seen_at=Worker.last_seen_at - timedelta(hours=1)))
        left = make_op(s, make_table(s, "left"))
        asked = make_op(s, make_table(s, "asked"), engine="spark-worker")
    with session_scope(factory) as s:
        assert live_worker_queues(s, within=ALIVE) == []
        assert _scheduler_claims(s) == [left.id], "spark-worker waits for a worker"
    with session_scope(factory) as s:
        worker = worker_seen(s, "w1", busy=0)
        assert worker is not None
        assert _worker_claims(s, worker) == [asked.id]
        attempt = get_attempt(s, s.get_one(Operation, asked.id).current_attempt_id or 0)
        assert (attempt.engine, attempt.worker_id, attempt.instance_id) == (
            "spark-worker",
            "w1",
            "w1",
        )


def test_a_worker_claims_in_its_own_queues_one_operation_per_table(
    factory: sessionmaker[Session],
) -> None:
    with session_scope(factory) as s:
        worker = _worker(s, queues=("etl",))
        table = make_table(s, "t")
        first = make_op(s, table, queue="etl", run_at=timedelta(seconds=-2))
        make_op(s, table, queue="etl", at="new")
        make_op(s, make_table(s, "other"))  # default queue: not this worker's
    with session_scope(factory) as s:
        assert _worker_claims(s, worker) == [first.id]
        assert _worker_claims(s, worker) == []


def test_workers_register_idempotently_and_leave(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as s:
        _worker(s, "w1")
        again = register_worker(
            s, "w1", host="h2", pid=2, spark_master="yarn", queues=["a", "b"], slots=4
        )
        assert (again.host, again.slots, again.queues) == ("h2", 4, ["a", "b"])
        assert [w.id for w in list_workers(s)] == ["w1"]
        assert live_worker_queues(s, within=ALIVE) == ["a", "b"]
        assert remove_worker(s, "w1") and not remove_worker(s, "w1")
        assert worker_seen(s, "w1") is None


@pytest.mark.parametrize("slots", [0, -1])
def test_a_worker_has_at_least_one_slot(factory: sessionmaker[Session], slots: int) -> None:
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError), session_scope(factory) as s:
        register_worker(
            s, "w", host="h", pid=1, spark_master="local", queues=["default"], slots=slots
        )
