"""The `postgres` table lock (`hoodie.write.lock.provider=postgres`): a PostgreSQL advisory
lock named by the table's base path, taken by the service on its own connection and, for a
job (which has no database access), by the service on the job's behalf through the job API.
The service and its jobs exclude each other on one table, and a job that dies does not keep
the lock."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests import oracle
from tests.api.conftest import MakeClient, batch, bearer
from tests.api.helpers import register, submit
from tests.services.test_clustering import group_target, small_files_table
from tests.store.helpers import claim, db_now
from tms.application.attempt_end import reap_expired_leases
from tms.backoff import Backoff
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.locks import (
    LockSpec,
    LockTimeoutError,
    advisory_key,
    hold_advisory,
    use_advisory_locks,
)
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.jobs.client import JobClient
from tms.jobs.table_lock import ServiceTableLocks
from tms.services.clustering.execute import schedule_clustering
from tms.services.registry import table_service
from tms.store import Claim, TableLocks, issue_attempt_token
from tms.testing.sample_writer.writer import HudiWriter

if TYPE_CHECKING:
    from starlette.testclient import TestClient

POSTGRES = LockSpec.of("postgres", wait_seconds=0.5)


def _running(client: TestClient, session: Session, base_path: str) -> tuple[Claim, str]:
    register(client, base_path=base_path, policy={"lock_provider": "postgres"})
    submit(client).raise_for_status()
    (c,) = claim(session, limit=1)
    token = issue_attempt_token(session, c.attempt)
    session.commit()
    return c, token


def _lock_url(c: Claim) -> str:
    return f"/v1/jobs/attempts/{c.attempt.id}/table-lock"


def _service_locks(client: TestClient) -> TableLocks:
    locks: TableLocks = client.app.state.table_locks  # type: ignore[attr-defined]
    return locks


def _service_can_lock(locks: TableLocks, base_path: str) -> bool:
    try:
        with hold_advisory(locks, advisory_key(base_path), wait_seconds=0.3):
            return True
    except LockTimeoutError:
        return False


def test_a_job_and_the_service_exclude_each_other_on_one_table(
    client: TestClient, session: Session
) -> None:
    c, token = _running(client, session, "/data/lake/trips")
    locks = _service_locks(client)
    auth = bearer(token)
    taken = client.post(_lock_url(c), json={}, headers=auth)
    assert (taken.status_code, taken.json()) == (200, {"held": True})
    again = client.post(_lock_url(c), json={}, headers=auth)
    assert again.json() == {"held": True}, "taking it twice is idempotent"
    assert not _service_can_lock(locks, "/data/lake/trips")
    assert _service_can_lock(locks, "/data/lake/other"), "another table's lock is free"
    released = client.delete(_lock_url(c), headers=auth)
    assert (released.status_code, released.json()) == (200, {"held": False})
    assert _service_can_lock(locks, "file:///data/lake/trips/"), "one lock per spelling"
    with hold_advisory(locks, advisory_key("/data/lake/trips"), wait_seconds=0.3):
        busy = client.post(_lock_url(c), json={}, headers=auth)
        assert busy.json() == {"held": False}, "the job waits while the service holds it"
    assert client.post(_lock_url(c), json={}, headers=auth).json() == {"held": True}
    result = client.post(
        f"/v1/jobs/attempts/{c.attempt.id}/result", json={"outcome": "SUCCEEDED"}, headers=auth
    )
    assert result.status_code == 200, result.text
    assert _service_can_lock(locks, "/data/lake/trips"), "the result releases what it held"


def test_a_reaped_attempt_loses_its_lock_and_may_not_take_it(
    client: TestClient, session: Session
) -> None:
    c, token = _running(client, session, "/data/lake/trips")
    locks = _service_locks(client)
    assert client.post(_lock_url(c), json={}, headers=bearer(token)).json() == {"held": True}
    reap_expired_leases(
        session, backoff=Backoff(0, 1, 0, 0), now=db_now(session) + timedelta(hours=1)
    )
    session.commit()
    assert locks.sweep(session) == [c.attempt.id]
    assert _service_can_lock(locks, "/data/lake/trips")
    refused = client.post(_lock_url(c), json={}, headers=bearer(token))
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "lease_lost"


def test_a_lock_dies_with_the_connection_that_held_it(factory: sessionmaker[Session]) -> None:
    """Two service instances on one database: the second waits for the first, and takes the
    lock once the first's connection is gone (its process died)."""
    engine = factory.kw["bind"]
    first, second = TableLocks(engine), TableLocks(engine)
    key = advisory_key("/data/lake/trips")
    assert first.take_for(1, key)
    with (
        pytest.raises(LockTimeoutError, match="held by another tms service"),
        hold_advisory(second, key, wait_seconds=0.3),
    ):
        pass
    first._jobs[1].connection.invalidate()  # the process holding it died
    with hold_advisory(second, key, wait_seconds=5):
        assert not first.take_for(2, key)


def test_a_jobs_scheduling_waits_for_the_postgres_lock_the_service_holds(
    client: TestClient, session: Session, tmp_path: Path, mor_table: HudiWriter
) -> None:
    """A job's `table_lock` on a `postgres` table goes through the job API: while the service
    holds the table's lock, the job schedules nothing; once it is free, the plan is written."""
    mor_table.upsert(batch(range(10), ts=2))
    base = mor_table.table.base_path
    before = oracle.snapshot(base)
    c, token = _running(client, session, base)
    table = HudiTable.open(base, lock=POSTGRES)
    job = JobClient("http://testserver", c.attempt.id, token, transport=client._transport)
    locks = _service_locks(client)
    with use_advisory_locks(ServiceTableLocks(job, retry_seconds=0.1)):
        with hold_advisory(locks, advisory_key(base), wait_seconds=1):
            with pytest.raises(LockTimeoutError):
                table_service("compaction").schedule(table, {})
            assert table.timeline().pending_compactions() == []
        planned = table_service("compaction").schedule(table, {})
        assert planned is not None
        assert [i.requested_time for i in table.timeline().pending_compactions()] == [planned]
        with table.lock.hold(table.storage):  # released after scheduling: the job takes it again
            assert not _service_can_lock(locks, base)
    assert _service_can_lock(locks, base)
    assert oracle.snapshot(base).equals(before)


def test_a_postgres_table_is_refused_where_no_service_takes_the_lock(
    tmp_path: Path, mor_table: HudiWriter
) -> None:
    table = HudiTable.open(mor_table.table.base_path, lock=POSTGRES)
    with (
        pytest.raises(UnsupportedTableError, match="PostgreSQL advisory lock taken through"),
        table.lock.hold(table.storage),
    ):
        pass


@pytest.mark.parametrize("held_by_a_job", [True, False])
def test_an_operator_cancel_on_a_postgres_table_takes_the_advisory_lock(
    make_client: MakeClient, tmp_path: Path, held_by_a_job: bool
) -> None:
    """The cancel request of a scheduled plan is written under the table's advisory lock:
    not while a job of the table holds it (the operation is cancelled in tms all the same),
    and at once when it is free."""
    client = make_client(storage_timeout_seconds=2)
    locks = _service_locks(client)
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=240, table_version=9)
    table = HudiTable.open(base)
    planned = schedule_clustering(table, target_file_size=group_target(base))
    assert planned is not None
    register(client, base_path=base, policy={"lock_provider": "postgres"})
    submitted = client.post(
        "/v1/hoodie/service/cluster/submit",
        json={"db_name": "lake", "table_name": "trips", "instant": planned},
    ).json()
    if held_by_a_job:
        assert locks.take_for(10_000, advisory_key(base))
    cancelled = client.post(f"/v1/operations/{submitted['id']}/cancel")
    assert cancelled.json()["status"] == "CANCELLED"
    assert cancel_requests.is_cancel_requested(table.storage, planned) is not held_by_a_job
    locks.release_for(10_000)
