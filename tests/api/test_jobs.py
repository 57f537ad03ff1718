"""The job side contract: spec, heartbeat, instant, result, scoped by the attempt token."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy.orm import Session

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, MakeClient, bearer
from tests.api.helpers import instant, register, submit
from tests.store.helpers import claim, db_now
from tms import metrics
from tms.application.attempt_end import reap_expired_leases
from tms.backoff import Backoff
from tms.store import Claim, issue_attempt_token

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def _launch(client: TestClient, session: Session, **submitted: Any) -> tuple[Claim, str]:
    """What the scheduler does: an operation claimed, its attempt given a job token."""
    register(client)
    submit(client, **submitted).raise_for_status()
    (c,) = claim(session, limit=1)
    token = issue_attempt_token(session, c.attempt)
    session.commit()
    return c, token


def _url(c: Claim, what: str) -> str:
    return f"/v1/jobs/attempts/{c.attempt.id}/{what}"


SUCCEEDED_NATIVE = {"action": "compaction", "outcome": "SUCCEEDED", "executor": "native"}


def _sample(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_happy_path_spec_heartbeat_instant_result(client: TestClient, session: Session) -> None:
    c, token = _launch(
        client, session, resource="8g", parallelism=4, extra_params={"strategy": "all"}
    )
    auth = bearer(token)
    spec = client.get(_url(c, "spec"), headers=auth)
    assert spec.status_code == 200, spec.text
    assert spec.json() == {
        "attempt_id": c.attempt.id,
        "operation_id": c.operation.id,
        "action": "compaction",
        "instant": None,
        "base_path": "/data/lake/trips",
        "db_name": "lake",
        "table_name": "trips",
        "parallelism": 4,
        "resource": "8g:8g",
        "extra_params": {"strategy": "all"},
        "heartbeat_interval_seconds": 10.0,
        "lease_seconds": 60.0,
        "cancel_requested": False,
        "storage_options": {},
        "executor": "auto",
    }
    beat = client.post(_url(c, "heartbeat"), json={}, headers=auth)
    assert beat.status_code == 200 and beat.json()["cancel_requested"] is False
    assert beat.json()["lease_expires_at"]
    at = instant()
    planned = client.post(_url(c, "instant"), json={"instant": at}, headers=auth)
    assert planned.status_code == 200 and planned.json()["instant"] == at
    before = _sample("tms_attempts_total", SUCCEEDED_NATIVE)
    result = {
        "outcome": "SUCCEEDED",
        "error": None,
        "retryable": False,
        "figures": {"files": 3, "bytes": 1024, "executor": "native"},
        "spark_app_id": "local-1700000000000",
    }
    done = client.post(_url(c, "result"), json=result, headers=auth)
    assert done.status_code == 200, done.text
    assert (done.json()["operation_status"], done.json()["duplicate"]) == ("COMPLETED", False)
    again = client.post(_url(c, "result"), json=result, headers=auth)
    assert (again.status_code, again.json()["duplicate"]) == (200, True)
    after = _sample("tms_attempts_total", SUCCEEDED_NATIVE)
    assert after == before + 1  # the repeat is not counted
    op = client.get(f"/v1/operations/{c.operation.id}").json()
    assert (op["status"], op["instant"], op["result"]) == ("COMPLETED", at, result["figures"])
    (attempt,) = client.get(f"/v1/operations/{c.operation.id}/attempts").json()
    assert (attempt["outcome"], attempt["spark_app_id"]) == ("SUCCEEDED", "local-1700000000000")
    # A finished attempt holds no lease any more: the job must stop.
    assert client.post(_url(c, "heartbeat"), json={}, headers=auth).status_code == 409
    assert client.get(_url(c, "spec"), headers=auth).status_code == 409


def test_wrong_or_missing_token_is_401(make_client: MakeClient, session: Session) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    admin = bearer(ADMIN)
    client.post(
        "/v1/hoodie/service/register?pending=true",
        json={"db_name": "lake", "table_name": "trips", "base_path": "/d/t"},
        headers=admin,
    ).raise_for_status()
    client.post(
        "/v1/hoodie/service/clean/submit",
        json={"db_name": "lake", "table_name": "trips"},
        headers=admin,
    ).raise_for_status()
    (c,) = claim(session, limit=1)
    token = issue_attempt_token(session, c.attempt)
    session.commit()
    for headers in ({}, bearer("not-a-token"), admin):
        response = client.get(_url(c, "spec"), headers=headers)
        assert response.status_code == 401, headers
        assert response.json()["error"]["code"] == "unauthorized"
    other = f"/v1/jobs/attempts/{c.attempt.id + 1}/spec"
    assert client.get(other, headers=bearer(token)).status_code == 401
    assert client.get(_url(c, "spec"), headers=bearer(token)).status_code == 200


def test_reaped_attempt_gets_409(client: TestClient, session: Session) -> None:
    c, token = _launch(client, session)
    reap_expired_leases(
        session, backoff=Backoff(0, 1, 0, 0), now=db_now(session) + timedelta(hours=1)
    )
    session.commit()
    auth = bearer(token)
    for method, what, body in [
        ("GET", "spec", None),
        ("POST", "heartbeat", {}),
        ("POST", "instant", {"instant": instant()}),
        ("POST", "result", {"outcome": "SUCCEEDED"}),
    ]:
        response = client.request(method, _url(c, what), json=body, headers=auth)
        assert response.status_code == 409, (what, response.text)
        assert response.json()["error"]["code"] == "lease_lost"


def test_failure_is_retried_with_backoff_then_fails(
    make_client: MakeClient, session: Session
) -> None:
    client = make_client(retry_base_seconds=30, retry_max_seconds=60, retry_jitter=0)
    c, token = _launch(client, session, max_retries=1)
    failed = {"outcome": "FAILED", "error": "executor lost", "retryable": True}
    first = client.post(_url(c, "result"), json=failed, headers=bearer(token)).json()
    assert first["operation_status"] == "SCHEDULED"
    delay = first["next_run_at"]
    assert delay is not None
    op = client.get(f"/v1/operations/{c.operation.id}").json()
    assert op["last_error"] == "executor lost"
    session.expire_all()
    # Due in ~30 s: not claimable now; claim it as if the delay had passed.
    assert claim(session, limit=1) == []
    (c2,) = claim(session, limit=1, now=db_now(session) + timedelta(seconds=31))
    token2 = issue_attempt_token(session, c2.attempt)
    session.commit()
    last = client.post(_url(c2, "result"), json=failed, headers=bearer(token2)).json()
    assert (last["operation_status"], last["next_run_at"]) == ("FAILED", None)
    attempts = client.get(f"/v1/operations/{c.operation.id}/attempts").json()
    assert [(a["outcome"], a["error"]) for a in attempts] == [("FAILED", "executor lost")] * 2


@pytest.mark.parametrize(
    ("outcome", "retryable", "status"),
    [("FAILED", False, "FAILED"), ("CANCELLED", False, "CANCELLED"), ("INVALID", False, "INVALID")],
)
def test_other_outcomes(
    client: TestClient, session: Session, outcome: str, retryable: bool, status: str
) -> None:
    c, token = _launch(client, session)
    body = {"outcome": outcome, "error": "x\x00y", "retryable": retryable}
    response = client.post(_url(c, "result"), json=body, headers=bearer(token))
    assert response.status_code == 200, response.text
    assert response.json()["operation_status"] == status
    again = client.post(_url(c, "result"), json=body, headers=bearer(token))
    assert again.status_code == 200 and again.json()["duplicate"] is True


def test_heartbeat_reports_cancel_requests(client: TestClient, session: Session) -> None:
    c, token = _launch(client, session)
    client.post(f"/v1/operations/{c.operation.id}/cancel").raise_for_status()
    beat = client.post(_url(c, "heartbeat"), headers=bearer(token))
    assert beat.status_code == 200 and beat.json()["cancel_requested"] is True


def test_bad_job_bodies_are_422(client: TestClient, session: Session) -> None:
    c, token = _launch(client, session)
    auth = bearer(token)
    assert client.post(_url(c, "result"), json={"outcome": "WON"}, headers=auth).status_code == 422
    bad = client.post(_url(c, "instant"), json={"instant": "soon"}, headers=auth)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "body.instant"


@pytest.mark.parametrize(
    ("submitted", "expected"),
    [({}, {"cancellable": True}), ({"cancellable": "false"}, {"cancellable": "false"})],
)
def test_a_tables_policy_makes_its_plans_cancellable_unless_the_submit_says(
    client: TestClient, session: Session, submitted: dict[str, Any], expected: dict[str, Any]
) -> None:
    table = register(client)
    patch = client.patch(
        f"/v1/tables/{table['id']}", json={"policy": {"compaction_cancellable": True}}
    )
    assert patch.status_code == 200, patch.text
    submit(client, extra_params=submitted).raise_for_status()
    (c,) = claim(session, limit=1)
    token = issue_attempt_token(session, c.attempt)
    session.commit()
    spec = client.get(_url(c, "spec"), headers=bearer(token))
    assert spec.status_code == 200, spec.text
    assert spec.json()["extra_params"] == expected


def test_a_tables_lock_settings_reach_every_job_and_unknown_providers_are_refused(
    client: TestClient, session: Session
) -> None:
    table = register(client)
    zookeeper = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
    refused = client.patch(
        f"/v1/tables/{table['id']}", json={"policy": {"lock_provider": zookeeper}}
    )
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["field"] == "body.policy.lock_provider" and "ZooKeeper" in error["message"]
    outside = client.patch(f"/v1/tables/{table['id']}", json={"policy": {"lock_path": "../x"}})
    assert outside.status_code == 422
    assert outside.json()["error"]["field"] == "body.policy.lock_path"
    policy = {"lock_path": ".hoodie/.aux", "lock_expire_minutes": 10}
    assert client.patch(f"/v1/tables/{table['id']}", json={"policy": policy}).status_code == 200
    submit(client, service="clean").raise_for_status()
    (c,) = claim(session, limit=1)
    token = issue_attempt_token(session, c.attempt)
    session.commit()
    spec = client.get(_url(c, "spec"), headers=bearer(token)).json()
    assert spec["extra_params"] == {
        "hoodie.write.lock.filesystem.path": ".hoodie/.aux",
        "hoodie.write.lock.filesystem.expire": 10,
    }


TRACEBACK = """RuntimeError: boom
Traceback (most recent call last):
  File "/opt/tms/.venv/lib/python3.11/site-packages/tms/jobs/runner.py", line 212, in _work
    result = self.execute(spec, table, instant, spark, on_stage)
RuntimeError: boom"""
EXIT_TAIL = """job process exited with code 1 without reporting a result
--- last lines of /srv/tms/logs/1/1.log ---
  File "/opt/tms/.venv/lib/python3.11/site-packages/pyspark/sql/session.py", line 1, in sql
py4j.protocol.Py4JJavaError: An error occurred"""


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (TRACEBACK, "RuntimeError: boom"),
        (EXIT_TAIL, "job process exited with code 1 without reporting a result"),
        (
            "Py4JJavaError: An error occurred while calling o56.sql.\n"
            ": org.apache.hudi.exception.HoodieException: no plan\n"
            "\tat org.apache.hudi.table.Plan.read(Plan.java:42)",
            "Py4JJavaError: An error occurred while calling o56.sql. "
            ": org.apache.hudi.exception.HoodieException: no plan",
        ),
    ],
    ids=["python-traceback", "exit-with-log-tail", "jvm-frames"],
)
def test_viewers_see_an_errors_class_and_message_never_its_traceback(
    make_client: MakeClient, session: Session, stored: str, shown: str
) -> None:
    """What an older job reported, or the log tail kept with a crashed job's exit, names
    the installation's paths: viewers get the class and message (the log has the rest)."""
    client = make_client(auth_tokens=AUTH_TOKENS)
    client.headers.update(bearer(ADMIN))
    c, token = _launch(client, session, max_retries=0)
    failed = {"outcome": "FAILED", "error": stored, "retryable": False}
    assert client.post(_url(c, "result"), json=failed, headers=bearer(token)).status_code == 200
    viewer = bearer(VIEWER)
    operation = client.get(f"/v1/operations/{c.operation.id}", headers=viewer)
    listed = client.get("/v1/operations", headers=viewer).json()["items"]
    attempts = client.get(f"/v1/operations/{c.operation.id}/attempts", headers=viewer)
    assert operation.json()["last_error"] == shown
    assert [o["last_error"] for o in listed] == [shown]
    assert [a["error"] for a in attempts.json()] == [shown]
    for response in (operation, attempts):
        assert "site-packages" not in response.text and "Traceback" not in response.text
