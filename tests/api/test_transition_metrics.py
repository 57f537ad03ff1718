"""An attempt's transitions count the same on `/metrics` whichever engine makes them: an
operation claimed by the scheduler (spark-submit) or by a resident worker moves to RUNNING
and has its wait from due to claim timed; a lease that expires, reaped by a scheduler tick or
by a worker's claim, ends its attempt as LOST and sends the operation back to SCHEDULED."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, update
from sqlalchemy.orm import Session, sessionmaker

from tests.api.conftest import MakeClient
from tests.api.helpers import register, submit
from tests.scheduler.fakes import FakeEngine, scheduler_for, settings_for
from tms.store import Operation, get_attempt, session_scope

if TYPE_CHECKING:
    from starlette.testclient import TestClient

WORKER = {
    "id": "metrics-worker",
    "host": "host",
    "pid": 4242,
    "spark_master": "local[2]",
    "queues": ["default"],
    "slots": 1,
}

COUNTED = {
    "running": ("tms_operation_transitions_total", {"action": "compaction", "status": "RUNNING"}),
    "scheduled": (
        "tms_operation_transitions_total",
        {"action": "compaction", "status": "SCHEDULED"},
    ),
    "waits": ("tms_scheduling_delay_seconds_count", {"action": "compaction"}),
    "lost": (
        "tms_attempts_total",
        {"action": "compaction", "outcome": "LOST", "executor": "none"},
    ),
}


def _counts(client: TestClient) -> dict[str, float]:
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
    }
    return {
        what: samples.get((name, tuple(sorted(labels.items()))), 0.0)
        for what, (name, labels) in COUNTED.items()
    }


def _expire_lease(factory: sessionmaker[Session], operation_id: int) -> None:
    with session_scope(factory) as session:
        session.execute(
            update(Operation)
            .where(Operation.id == operation_id)
            .values(lease_expires_at=func.now() - timedelta(seconds=1))
        )


def _by_worker(client: TestClient, factory: sessionmaker[Session], _: Path) -> None:
    """Claim, let the lease expire, claim again: the second claim reaps the first."""
    client.post("/v1/workers", json=WORKER).raise_for_status()

    def claim() -> list[dict[str, object]]:
        body = {"free": 1, "wait_seconds": 0}
        response = client.post(f"/v1/workers/{WORKER['id']}/claim", json=body)
        response.raise_for_status()
        attempts: list[dict[str, object]] = response.json()["attempts"]
        return attempts

    (first,) = claim()
    _expire_lease(factory, int(str(first["operation_id"])))
    assert claim() == [], "the reaped operation waits for its retry"


def _by_scheduler(client: TestClient, factory: sessionmaker[Session], tmp_path: Path) -> None:
    """A tick claims and launches (spark-submit), the lease expires, a tick reaps it."""
    settings = settings_for(tmp_path, retry_base_seconds=600.0)
    scheduler = scheduler_for(settings, factory, FakeEngine())
    (claimed,) = scheduler.tick().launched
    with session_scope(factory) as session:
        operation_id = get_attempt(session, claimed).operation_id
    _expire_lease(factory, operation_id)
    assert scheduler.tick().launched == [], "the reaped operation waits for its retry"


@pytest.mark.parametrize(
    "run_by", [_by_scheduler, _by_worker], ids=["spark-submit", "resident-worker"]
)
def test_every_engine_counts_claims_and_reaped_leases_the_same(
    make_client: MakeClient,
    factory: sessionmaker[Session],
    tmp_path: Path,
    run_by: Callable[[TestClient, sessionmaker[Session], Path], None],
) -> None:
    client = make_client(retry_base_seconds=600, retry_jitter=0)
    register(client)
    submit(client).raise_for_status()
    before = _counts(client)

    run_by(client, factory, tmp_path)

    after = _counts(client)
    moved = {what: after[what] - before[what] for what in COUNTED}
    assert moved == {"running": 1, "waits": 1, "lost": 1, "scheduled": 1}, moved
