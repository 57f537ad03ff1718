"""The executor choice through the API: the submit's `executor`, else the table policy's,
else `TMS_EXECUTOR`; sent to the job in its spec; who ran, and why native declined, kept
from the job's result and shown on the operation."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy.orm import Session

from tests.api.conftest import MakeClient, bearer
from tests.api.helpers import client_params, instant, register, submit
from tests.store.helpers import claim, db_now
from tms.store import Claim, issue_attempt_token
from tms.testing.sample_writer.writer import HudiWriter

if TYPE_CHECKING:
    from starlette.testclient import TestClient

DECLINED = "the table's merge mode CUSTOM is not supported by the native compaction"


def _operation(client: TestClient, operation_id: int) -> dict[str, Any]:
    response = client.get(f"/v1/operations/{operation_id}")
    assert response.status_code == 200, response.text
    shown: dict[str, Any] = response.json()
    return shown


def _set_policy(client: TestClient, table_id: int, policy: dict[str, Any]) -> Any:
    return client.patch(f"/v1/tables/{table_id}", json={"policy": policy})


def _assert_refused(response: Any, field: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", field)
    assert "auto, native, hudi" in error["message"], error["message"]


@pytest.mark.parametrize(
    ("asked", "stored"),
    [("native", "native"), ("hudi", "hudi"), ("auto", "auto"), (" HUDI ", "hudi")],
)
def test_a_submits_executor_is_stored_and_shown(
    client: TestClient, asked: str, stored: str
) -> None:
    register(client)
    response = submit(client, executor=asked)
    assert response.status_code == 201, response.text
    assert response.json()["executor"] == stored
    shown = _operation(client, response.json()["id"])
    assert (shown["executor"], shown["executed_by"], shown["native_declined"]) == (
        stored,
        None,
        None,
    )
    listed = client.get("/v1/operations").json()["items"]
    assert [o["executor"] for o in listed] == [stored]


@pytest.mark.parametrize("value", ["spark", "", 1, ["hudi"]])
def test_a_bad_executor_is_refused_naming_the_field(client: TestClient, value: Any) -> None:
    table = register(client)
    _assert_refused(submit(client, executor=value), "body.executor")
    _assert_refused(_set_policy(client, table["id"], {"executor": value}), "body.policy.executor")
    assert client.get("/v1/operations").json()["items"] == []
    assert client.get(f"/v1/tables/{table['id']}").json()["policy"] == {}


def test_a_policy_executor_is_refused_at_registration_too(client: TestClient) -> None:
    body = {"db_name": "lake", "table_name": "trips", "base_path": "/data/lake/trips"}
    refused = client.post(
        "/v1/tables", json={**body, "policy": {"executor": "flink"}}, params={"pending": True}
    )
    _assert_refused(refused, "body.policy.executor")


def test_the_table_policy_chooses_when_the_submit_does_not(make_client: MakeClient) -> None:
    client = make_client(executor="native")
    table = register(client)
    patched = _set_policy(client, table["id"], {"executor": "Hudi"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["policy"] == {"executor": "hudi"}
    by_policy = submit(client, "compact").json()
    by_submit = submit(client, "clean", executor="native").json()
    assert (by_policy["executor"], by_submit["executor"]) == ("hudi", "native")


def test_the_setting_chooses_when_neither_does(make_client: MakeClient) -> None:
    register(make_client(executor="hudi"))
    assert submit(make_client(executor="hudi")).json()["executor"] == "hudi"
    assert submit(make_client(), "clean").json()["executor"] == "auto"


def test_a_repeated_submit_returns_the_same_operation(client: TestClient) -> None:
    register(client)
    first, again = submit(client, executor="hudi"), submit(client, executor="hudi")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["executor"] == "hudi"


def test_the_hudi_clients_request_takes_the_policy_else_the_setting(
    make_client: MakeClient, mor_table: HudiWriter
) -> None:
    client = make_client(executor="native")
    base = mor_table.table.base_path
    params = client_params(base, instant=instant())
    created = client.get("/v1/hoodie/service/compact", params=params).json()
    assert [o["executor"] for o in created["operations"]] == ["native"]
    policy = _set_policy(client, created["table_id"], {"executor": "hudi"})
    assert policy.status_code == 200, policy.text
    later = client.get("/v1/hoodie/service/compact", params={**params, "instant": instant()})
    assert [o["executor"] for o in later.json()["operations"]] == ["hudi"]


def _launch(
    client: TestClient, session: Session, *, later: float = 0
) -> tuple[Claim, dict[str, str]]:
    """The scheduler's claim (as if `later` seconds had passed) and the attempt's job token."""
    (c,) = claim(session, limit=1, now=db_now(session) + timedelta(seconds=later))
    token = issue_attempt_token(session, c.attempt)
    session.commit()
    return c, bearer(token)


def _report(client: TestClient, c: Claim, auth: dict[str, str], **result: Any) -> Any:
    response = client.post(f"/v1/jobs/attempts/{c.attempt.id}/result", json=result, headers=auth)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("asked", ["auto", "native", "hudi"])
def test_the_job_spec_carries_the_operations_executor(
    client: TestClient, session: Session, asked: str
) -> None:
    register(client)
    submit(client, executor=asked).raise_for_status()
    c, auth = _launch(client, session)
    spec = client.get(f"/v1/jobs/attempts/{c.attempt.id}/spec", headers=auth)
    assert spec.status_code == 200, spec.text
    assert spec.json()["executor"] == asked


def test_who_ran_and_why_native_declined_are_kept_and_a_retry_replaces_them(
    client: TestClient, session: Session
) -> None:
    register(client)
    operation_id = submit(client, max_retries=1).json()["id"]
    c, auth = _launch(client, session)
    figures = {"executor": "hudi", "native_declined": DECLINED, "files": 2}
    failed = _report(
        client, c, auth, outcome="FAILED", error="boom", retryable=True, figures=figures
    )
    assert failed["operation_status"] == "SCHEDULED"
    shown = _operation(client, operation_id)
    assert (shown["executor"], shown["executed_by"], shown["native_declined"]) == (
        "auto",
        "hudi",
        DECLINED,
    )
    session.expire_all()
    retry, retry_auth = _launch(client, session, later=3600)
    _report(client, retry, retry_auth, outcome="SUCCEEDED", figures={"executor": "native"})
    shown = _operation(client, operation_id)
    assert (shown["status"], shown["executed_by"], shown["native_declined"]) == (
        "COMPLETED",
        "native",
        None,
    )


@pytest.mark.parametrize("outcome", ["CANCELLED", "INVALID"])
def test_a_report_is_kept_whatever_the_outcome(
    client: TestClient, session: Session, outcome: str
) -> None:
    register(client)
    operation_id = submit(client).json()["id"]
    c, auth = _launch(client, session)
    figures = {"executor": "hudi", "native_declined": "x" * 5000}
    _report(client, c, auth, outcome=outcome, error="stopped", figures=figures)
    shown = _operation(client, operation_id)
    assert shown["executed_by"] == "hudi"
    assert len(shown["native_declined"]) == 2000 and shown["native_declined"].endswith("…")


@pytest.mark.parametrize(
    "figures",
    [{}, {"executor": "auto"}, {"executor": "spark"}, {"executor": None}, {"native_declined": "y"}],
)
def test_a_result_naming_no_executor_that_runs_records_none(
    client: TestClient, session: Session, figures: dict[str, Any]
) -> None:
    register(client)
    operation_id = submit(client).json()["id"]
    c, auth = _launch(client, session)
    _report(client, c, auth, outcome="SUCCEEDED", figures=figures)
    shown = _operation(client, operation_id)
    assert (shown["status"], shown["executed_by"], shown["native_declined"]) == (
        "COMPLETED",
        None,
        None,
    )
