"""Resident Spark workers (`tms worker`): their rows, and the attempts they claim.

A worker registers what it offers (queues, slots), calls in at least every
`worker_timeout_seconds` (each claim does), and claims due operations it can run with the
same statement the scheduler claims with (`claim_due_operations(for_worker=True)`), so every
guarantee of a claim holds: one running operation per table, queue limits over all
instances and workers, a lease its heartbeats must keep. A worker that stops calling in is
no longer counted: operations left to choose their engine go to spark-submit again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from tms.store.claiming import Claim, claim_due_operations
from tms.store.models import Attempt, Worker

__all__ = [
    "SPARK_SUBMIT",
    "SPARK_WORKER",
    "claim_worker_operations",
    "list_workers",
    "live_worker_queues",
    "record_engine",
    "register_worker",
    "remove_worker",
    "worker_seen",
]

SPARK_SUBMIT = "spark-submit"
SPARK_WORKER = "spark-worker"


def register_worker(
    session: Session,
    worker_id: str,
    *,
    host: str,
    pid: int,
    spark_master: str,
    queues: Sequence[str],
    slots: int,
) -> Worker:
    """Insert the worker, or refresh what it offers if the id is known (idempotent)."""
    values = {
        "host": host,
        "pid": pid,
        "spark_master": spark_master,
        "queues": list(queues),
        "slots": slots,
    }
    stmt = (
        insert(Worker)
        .values(id=worker_id, **values)
        .on_conflict_do_update(
            index_elements=[Worker.id], set_={**values, "last_seen_at": func.now()}
        )
        .returning(Worker)
        .execution_options(populate_existing=True)
    )
    return session.scalars(stmt).one()


def worker_seen(session: Session, worker_id: str, *, busy: int | None = None) -> Worker | None:
    """The worker called in (with its busy slots); None when it is not registered."""
    values: dict[str, Any] = {"last_seen_at": func.now()}
    if busy is not None:
        values["busy"] = max(0, busy)
    stmt = (
        update(Worker)
        .where(Worker.id == worker_id)
        .values(**values)
        .returning(Worker)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    return session.scalars(stmt).one_or_none()


def remove_worker(session: Session, worker_id: str) -> bool:
    """Forget a worker that stopped; True when it was registered."""
    stmt = delete(Worker).where(Worker.id == worker_id).returning(Worker.id)
    return session.execute(stmt).one_or_none() is not None


def list_workers(session: Session, *, alive_within: timedelta | None = None) -> list[Worker]:
    """Workers, oldest first; only those that called in within `alive_within` if given."""
    stmt = select(Worker).order_by(Worker.started_at, Worker.id)
    if alive_within is not None:
        stmt = stmt.where(Worker.last_seen_at >= func.now() - alive_within)
    return list(session.scalars(stmt))


def live_worker_queues(session: Session, *, within: timedelta) -> list[str]:
    """The queues that workers alive (called in within `within`) serve."""
    stmt = (
        select(func.unnest(Worker.queues))
        .where(Worker.last_seen_at >= func.now() - within)
        .distinct()
    )
    return sorted(session.scalars(stmt))


def claim_worker_operations(
    session: Session,
    worker: Worker,
    *,
    limit: int,
    queue_limits: Mapping[str, int] | None,
    lease_seconds: float,
    owner_limits: Mapping[str, int] | None = None,
    table_runs_per_hour: int = 0,
) -> list[Claim]:
    """Claim up to `limit` due operations the worker can run, in its queues; their
    attempts name the worker and the `spark-worker` engine. The queue, owner and hourly
    table limits are the scheduler's: they count every running operation, whoever runs it."""
    claims = claim_due_operations(
        session,
        worker.id,
        limit=limit,
        queue_limits=queue_limits,
        lease_seconds=lease_seconds,
        worker_queues=worker.queues,
        for_worker=True,
        owner_limits=owner_limits,
        table_runs_per_hour=table_runs_per_hour,
    )
    if claims:
        record_engine(session, [c.attempt.id for c in claims], SPARK_WORKER, worker_id=worker.id)
        session.execute(
            update(Worker)
            .where(Worker.id == worker.id)
            .values(attempts_run=Worker.attempts_run + len(claims), last_seen_at=func.now())
            .execution_options(synchronize_session=False)
        )
    return claims


def record_engine(
    session: Session,
    attempt_ids: Sequence[int],
    engine: str,
    *,
    worker_id: str | None = None,
    note: str | None = None,
) -> None:
    """Keep on the attempts the engine that runs them (and why not a worker, `note`)."""
    session.execute(
        update(Attempt)
        .where(Attempt.id.in_(list(attempt_ids)))
        .values(engine=engine, worker_id=worker_id, engine_note=note)
        .execution_options(synchronize_session="fetch")
    )
