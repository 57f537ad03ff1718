"""RFC-43's `index` word: submit with the metadata partitions to build or drop, the refusals
that name the field, and what remove and the Hudi client's GET do for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.api.helpers import client_params, instant, register, submit
from tms.store import Operation, ServiceAction, set_operation_instant

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def _operations(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Operation)) or 0


def _index(client: TestClient, **extra_params: Any) -> Any:
    return submit(client, "index", extra_params=extra_params)


def test_submit_index_creates_one_plan_less_operation_then_returns_it(
    client: TestClient, session: Session
) -> None:
    register(client)
    first = _index(client, partitions="record_index,column_stats")
    assert first.status_code == 201, first.text
    op = first.json()
    assert (op["action"], op["instant"], op["status"], op["created"]) == (
        "indexing",
        None,
        "SCHEDULED",
        True,
    )
    assert op["extra_params"] == {"partitions": "record_index,column_stats"}
    again = _index(client, partitions="column_stats, record_index,record_index")
    assert again.status_code == 200, again.text
    assert (again.json()["id"], again.json()["created"]) == (op["id"], False)
    assert _operations(session) == 1
    listed = client.get("/v1/operations", params={"action": "index"}).json()["items"]
    assert [o["id"] for o in listed] == [op["id"]]


def test_submit_index_takes_a_list_of_partitions(client: TestClient) -> None:
    register(client)
    response = _index(client, partitions=["record_index", "column_stats"])
    assert response.status_code == 201, response.text
    assert response.json()["extra_params"] == {"partitions": "record_index,column_stats"}
    nested = _index(client, partitions=["record_index,files"])
    assert nested.status_code == 422, nested.text
    assert nested.json()["error"]["field"] == "body.extra_params"


def test_submit_index_drop_is_accepted_and_stored(client: TestClient) -> None:
    register(client)
    for spelling in (True, "1"):
        response = _index(client, partitions="record_index", drop=spelling)
        assert response.status_code in (200, 201), response.text
        assert response.json()["extra_params"]["drop"] in ("true", "1")
    # "true" and "1" are the same request: one operation
    ids = {o["id"] for o in client.get("/v1/operations").json()["items"]}
    assert len(ids) == 1


@pytest.mark.parametrize(
    ("extra_params", "message"),
    [
        ({}, "partitions is required"),
        ({"drop": "true"}, "partitions is required"),
        ({"partitions": ""}, "expected one or more of files, column_stats"),
        (
            {"partitions": "record_index,bloom_filters"},
            "unknown metadata partition 'bloom_filters'",
        ),
        ({"partitions": "secondary_index_city"}, "unknown metadata partition"),
    ],
)
def test_submit_index_without_usable_partitions_is_refused_naming_the_field(
    client: TestClient, session: Session, extra_params: dict[str, str], message: str
) -> None:
    register(client)
    response = _index(client, **extra_params)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", "body.extra_params.partitions")
    assert message in error["message"]
    assert _operations(session) == 0


def test_submit_index_with_a_bad_drop_value_names_drop(client: TestClient) -> None:
    register(client)
    response = _index(client, partitions="record_index", drop="maybe")
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "body.extra_params.drop"
    assert "expected true or false" in response.json()["error"]["message"]


def test_other_actions_do_not_need_partitions(client: TestClient) -> None:
    register(client)
    assert submit(client, "clean").status_code == 201
    # an index key on another action is accepted and unused, as other actions' keys are
    assert submit(client, "cluster", extra_params={"partitions": "files"}).status_code == 201


def test_submit_index_refuses_an_instant(client: TestClient, session: Session) -> None:
    register(client)
    response = submit(
        client, "index", instant=instant(), extra_params={"partitions": "record_index"}
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "body.instant"
    assert "plan tms schedules itself" in error["message"]
    assert _operations(session) == 0


def test_a_different_index_request_while_one_waits_to_plan_is_409(
    client: TestClient, session: Session
) -> None:
    register(client)
    pending = _index(client, partitions="record_index").json()
    for other in ({"partitions": "column_stats"}, {"partitions": "record_index", "drop": "true"}):
        response = _index(client, **other)
        assert response.status_code == 409, response.text
        error = response.json()["error"]
        assert error["code"] == "operation_conflict"
        assert f"index operation {pending['id']}" in error["message"]
    assert _operations(session) == 1


def test_remove_index_by_the_instant_its_job_planned(client: TestClient, session: Session) -> None:
    register(client)
    op = _index(client, partitions="column_stats").json()
    at = instant()
    set_operation_instant(session, op["id"], at)
    session.commit()
    body = {"db_name": "lake", "table_name": "trips", "instant": at}
    removed = client.post("/v1/hoodie/service/index/remove", json=body)
    assert removed.status_code == 200, removed.text
    assert (removed.json()["action"], removed.json()["status"]) == ("indexing", "CANCELLED")
    other = client.post("/v1/hoodie/service/index/remove", json={**body, "instant": instant()})
    assert other.status_code == 404


def test_client_request_for_index_is_refused_cancel_works(
    client: TestClient, session: Session
) -> None:
    table = register(client)
    base = table["base_path"]
    requested = client.get(
        "/v1/hoodie/service/index",
        params=client_params(base, instant=instant(), extra_params="partitions=record_index"),
    )
    assert requested.status_code == 422, requested.text
    assert requested.json()["error"]["field"] == "query.action"
    assert _operations(session) == 0

    op = _index(client, partitions="record_index").json()
    at = instant()
    set_operation_instant(session, op["id"], at)
    session.commit()
    cancel = client.get(
        "/v1/hoodie/service/index", params=client_params(base, instant=at, action="CANCEL")
    )
    assert cancel.status_code == 200, cancel.text
    assert [o["status"] for o in cancel.json()["operations"]] == ["CANCELLED"]
    stored = session.get(Operation, op["id"])
    assert stored is not None and stored.action is ServiceAction.INDEXING


def test_the_openapi_document_lists_the_index_routes(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/hoodie/service/index/submit", "/v1/hoodie/service/index/remove"} <= set(paths)
    assert "get" in paths["/v1/hoodie/service/index"]
    assert "partitions" in paths["/v1/hoodie/service/index/submit"]["post"]["description"]
