"""`/v1/workers`: resident workers register (admin), claim attempts with a long poll and
get each attempt's job token, leave; anyone who may read lists them."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, update
from sqlalchemy.orm import Session

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, WRITER, MakeClient, bearer
from tests.api.helpers import register, submit
from tms.store import Operation

if TYPE_CHECKING:
    from starlette.testclient import TestClient

WORKER = {
    "id": "host-1-ab12",
    "host": "host",
    "pid": 4242,
    "spark_master": "local[2]",
    "queues": ["default"],
    "slots": 2,
}


def _claim(client: TestClient, **body: Any) -> Any:
    return client.post(
        f"/v1/workers/{WORKER['id']}/claim", json={"free": 2, "wait_seconds": 0, **body}
    )


def test_a_worker_registers_claims_with_job_tokens_and_leaves(client: TestClient) -> None:
    assert client.post("/v1/workers", json=WORKER).status_code == 201
    again = client.post("/v1/workers", json={**WORKER, "slots": 3})
    assert again.status_code == 201 and again.json()["slots"] == 3, "registering is idempotent"
    register(client)
    submit(client).raise_for_status()
    claimed = _claim(client, busy=0, log_dir="/var/log/tms-worker")
    assert claimed.status_code == 200, claimed.text
    (attempt,) = claimed.json()["attempts"]
    assert attempt["action"] == "compaction"
    spec = client.get(
        f"/v1/jobs/attempts/{attempt['attempt_id']}/spec", headers=bearer(attempt["token"])
    )
    assert spec.status_code == 200, "the token is the attempt's job token"
    attempts = client.get(f"/v1/operations/{attempt['operation_id']}/attempts").json()
    assert attempts[0]["engine"] == "spark-worker" and attempts[0]["worker_id"] == WORKER["id"]
    assert attempts[0]["log_path"] == (
        f"/var/log/tms-worker/{attempt['operation_id']}/{attempt['attempt_id']}.log"
    )
    (listed,) = client.get("/v1/workers").json()
    assert (listed["attempts_run"], listed["alive"]) == (1, True)
    assert _claim(client).json() == {"attempts": []}, "one running operation per table"
    assert client.delete(f"/v1/workers/{WORKER['id']}").status_code == 204
    assert client.get("/v1/workers").json() == []
    gone = _claim(client)
    assert gone.status_code == 404 and "register it again" in gone.json()["error"]["message"]


def test_a_claim_waits_for_due_work_up_to_its_wait(client: TestClient) -> None:
    client.post("/v1/workers", json=WORKER).raise_for_status()
    started = time.monotonic()
    empty = _claim(client, wait_seconds=1)
    assert empty.json() == {"attempts": []}
    assert time.monotonic() - started >= 1, "a long poll, not an immediate answer"


def test_bad_registrations_are_422_naming_the_field(client: TestClient) -> None:
    for field, value in [("slots", 0), ("id", "a/b"), ("queues", []), ("pid", -1)]:
        refused = client.post("/v1/workers", json={**WORKER, field: value})
        assert refused.status_code == 422, (field, refused.text)
        assert refused.json()["error"]["field"] == f"body.{field}"


def test_only_admins_register_and_claim(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    for token in (WRITER, VIEWER):
        assert client.post("/v1/workers", json=WORKER, headers=bearer(token)).status_code == 403
    assert client.post("/v1/workers", json=WORKER, headers=bearer(ADMIN)).status_code == 201
    claim = client.post(
        f"/v1/workers/{WORKER['id']}/claim",
        json={"free": 1, "wait_seconds": 0},
        headers=bearer(WRITER),
    )
    assert claim.status_code == 403
    assert client.get("/v1/workers", headers=bearer(VIEWER)).status_code == 200
    assert client.get("/v1/workers").status_code == 401


def test_a_claim_reaps_expired_leases_so_workers_need_no_scheduler(
    make_client: MakeClient, session: Session
) -> None:
    """An API-only service: a worker that died holding an attempt loses it at the next
    claim of any worker, and the operation runs again."""
    client = make_client(retry_base_seconds=0, retry_jitter=0)
    client.post("/v1/workers", json=WORKER).raise_for_status()
    register(client)
    submit(client).raise_for_status()
    (first,) = _claim(client).json()["attempts"]
    session.execute(
        update(Operation)
        .where(Operation.id == first["operation_id"])
        .values(lease_expires_at=func.now() - timedelta(seconds=1))
    )
    session.commit()
    (second,) = _claim(client).json()["attempts"]
    assert second["operation_id"] == first["operation_id"]
    attempts = client.get(f"/v1/operations/{first['operation_id']}/attempts").json()
    assert [a["outcome"] for a in attempts] == ["LOST", "RUNNING"]
