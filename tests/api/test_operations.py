"""Operator resource /v1/operations: listing, detail, cancel, retry, attempts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from tests.api.helpers import instant, register, submit
from tests.store.helpers import claim
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
    refused = client.post(f"/v1/operations/{op_id}/retry")
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
