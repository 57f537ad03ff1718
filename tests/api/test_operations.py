"""Operator resource /v1/operations: listing, detail, cancel, retry, attempts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy.orm import Session

from tests.api.helpers import instant, register, submit
from tests.services.test_clustering import group_target, small_files_table
from tests.store.helpers import claim
from tms.hudi.locks import FileSystemLock
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.services.clustering.execute import schedule_clustering
from tms.store import fail_attempt

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def _seed(client: TestClient) -> list[int]:
    register(client)
    register(client, "other")
    ids = [submit(client, instant=instant()).json()["id"] for _ in range(3)]
    ids.append(submit(client, "clean").json()["id"])
    other = {"db_name": "lake", "table_name": "other"}
    ids.append(client.post("/v1/hoodie/service/clean/submit", json=other).json()["id"])
    return ids


def test_list_filters_and_paginates_newest_first(client: TestClient) -> None:
    ids = _seed(client)
    page = client.get("/v1/operations", params={"limit": 2}).json()
    assert [o["id"] for o in page["items"]] == ids[::-1][:2]
    collected = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/operations", params=params).json()
        collected += [o["id"] for o in page["items"]]
        if (cursor := page["next_cursor"]) is None:
            break
    assert collected == ids[::-1]
    table_id = client.get("/v1/operations", params={"limit": 1}).json()["items"][0]["table_id"]
    by_table = client.get("/v1/operations", params={"table_id": table_id}).json()["items"]
    assert [o["id"] for o in by_table] == [ids[-1]]
    cleans = client.get("/v1/operations", params={"action": "CLEAN"}).json()["items"]
    assert {o["id"] for o in cleans} == {ids[3], ids[4]}
    both = client.get("/v1/operations", params={"status": "scheduled,RUNNING"}).json()["items"]
    assert len(both) == 5
    assert client.get("/v1/operations", params={"status": "FAILED"}).json()["items"] == []
    for params in ({"status": "BOGUS"}, {"action": "vacuum"}, {"limit": 501}, {"cursor": "x"}):
        response = client.get("/v1/operations", params=params)
        assert response.status_code == 422, params
        assert response.json()["error"]["field"] == f"query.{next(iter(params))}"


def test_detail_cancel_and_retry(client: TestClient) -> None:
    op_id = _seed(client)[0]
    detail = client.get(f"/v1/operations/{op_id}").json()
    assert [(e["from_status"], e["to_status"]) for e in detail["events"]] == [(None, "SCHEDULED")]
    cancelled = client.post(f"/v1/operations/{op_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "CANCELLED"
    assert client.post(f"/v1/operations/{op_id}/cancel").status_code == 200  # idempotent
    retried = client.post(f"/v1/operations/{op_id}/retry")
    assert retried.status_code == 200 and retried.json()["status"] == "SCHEDULED"
    new_id = retried.json()["id"]
    assert new_id != op_id, "a cancelled operation stays cancelled: its retry is a new one"
    assert client.get(f"/v1/operations/{op_id}").json()["status"] == "CANCELLED"
    again = client.post(f"/v1/operations/{op_id}/retry")
    assert again.status_code == 200 and again.json()["id"] == new_id  # idempotent
    refused = client.post(f"/v1/operations/{new_id}/retry")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "transition_refused"
    assert client.get("/v1/operations/424242").status_code == 404
    assert client.post("/v1/operations/424242/cancel").status_code == 404


def test_cancel_running_requests_cancellation(client: TestClient, session: Session) -> None:
    _seed(client)
    (c,) = claim(session, limit=1)
    session.commit()
    response = client.post(f"/v1/operations/{c.operation.id}/cancel")
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["cancel_requested"]) == ("RUNNING", True)


def test_attempts_keep_their_errors(client: TestClient, session: Session) -> None:
    _seed(client)
    (c,) = claim(session, limit=1)
    fail_attempt(session, c.attempt, error="disk full", exit_code=1)
    session.commit()
    attempts = client.get(f"/v1/operations/{c.operation.id}/attempts")
    assert attempts.status_code == 200
    (attempt,) = attempts.json()
    assert (attempt["number"], attempt["outcome"], attempt["error"], attempt["exit_code"]) == (
        1,
        "FAILED",
        "disk full",
        1,
    )
    assert attempt["duration_seconds"] is not None
    assert client.get("/v1/operations/424242/attempts").status_code == 404


@pytest.mark.parametrize("cancellable", [True, False])
def test_cancelling_a_scheduled_operation_requests_the_cancel_on_the_table(
    client: TestClient, tmp_path: Path, cancellable: bool
) -> None:
    """So that writers see it (RFC-79), and the next clean aborts the plan; a plan that is
    not cancellable is left to run later."""
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=240, table_version=9)
    instant = schedule_clustering(
        HudiTable.open(base), target_file_size=group_target(base), cancellable=cancellable
    )
    assert instant is not None
    registered = client.post(
        "/v1/hoodie/service/register",
        json={"db_name": "lake", "table_name": "trips", "base_path": base},
    )
    assert registered.status_code == 201, registered.text
    submitted = client.post(
        "/v1/hoodie/service/cluster/submit",
        json={"db_name": "lake", "table_name": "trips", "instant": instant},
    )
    assert submitted.status_code == 201, submitted.text
    cancelled = client.post(f"/v1/operations/{submitted.json()['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "CANCELLED"
    storage = HudiTable.open(base).storage
    assert cancel_requests.is_cancel_requested(storage, instant) is cancellable


@pytest.mark.parametrize("how", ["client CANCEL", "remove"])
def test_an_rfc43_cancel_of_a_scheduled_plan_requests_the_cancel_on_the_table(
    client: TestClient, tmp_path: Path, how: str
) -> None:
    """The table-service-manager client's `CANCEL` and RFC-43's remove cancel a scheduled
    operation as an operator's cancel does: its plan's cancel request is written too."""
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=240, table_version=9)
    instant = schedule_clustering(HudiTable.open(base), target_file_size=group_target(base))
    assert instant is not None
    names = {"db_name": "lake", "table_name": "trips"}
    assert client.post("/v1/hoodie/service/register", json={**names, "base_path": base}).is_success
    submitted = client.post("/v1/hoodie/service/cluster/submit", json={**names, "instant": instant})
    assert submitted.status_code == 201, submitted.text
    if how == "remove":
        removed = client.post(
            "/v1/hoodie/service/cluster/remove", json={**names, "instant": instant}
        )
        assert removed.status_code == 200 and removed.json()["status"] == "CANCELLED"
    else:
        query = {"basepath": base, "instant": instant, "action": "CANCEL"}
        answered = client.get("/v1/hoodie/service/cluster", params=query)
        assert answered.status_code == 200, answered.text
        assert [o["status"] for o in answered.json()["operations"]] == ["CANCELLED"]
    assert cancel_requests.is_cancel_requested(HudiTable.open(base).storage, instant)


def test_the_cancel_request_takes_the_lock_the_tables_writers_use(
    client: TestClient, tmp_path: Path
) -> None:
    """The table's lock folder is `.hoodie/.aux`: a lock held at `.hoodie/lock`, which is
    not the table's, does not keep the request from being written."""
    base = small_files_table(tmp_path, COPY_ON_WRITE, rows=240, table_version=9)
    table = HudiTable.open(base)
    target = group_target(base)
    first = schedule_clustering(table, target_file_size=target)
    assert first is not None
    registered = client.post(
        "/v1/hoodie/service/register",
        json={"db_name": "lake", "table_name": "trips", "base_path": base},
    ).json()
    policy = {"lock_path": ".hoodie/.aux"}
    assert client.patch(f"/v1/tables/{registered['id']}", json={"policy": policy}).is_success
    submitted = client.post(
        "/v1/hoodie/service/cluster/submit",
        json={"db_name": "lake", "table_name": "trips", "instant": first},
    ).json()
    with FileSystemLock(table.storage, owner="elsewhere"):  # .hoodie/lock
        assert client.post(f"/v1/operations/{submitted['id']}/cancel").is_success
    assert cancel_requests.is_cancel_requested(table.storage, first)
