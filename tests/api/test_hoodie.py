"""RFC-43 register/submit/remove and the Hudi table-service-manager client's GETs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.api.conftest import MakeClient
from tests.api.helpers import client_params, instant, register, submit
from tms.store import Operation
from tms.testing.sample_writer.writer import HudiWriter

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def test_register_is_idempotent_and_conflicts_are_409(client: TestClient) -> None:
    body = {"db_name": "lake", "table_name": "trips", "base_path": "/data/lake/trips/"}
    url = "/v1/hoodie/service/register?pending=true"
    first = client.post(url, json={**body, "owner": "ann", "x": 1})
    again = client.post(url, json={**body, "base_path": "file:///data//lake/./trips"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert (first.json()["created"], again.json()["created"]) == (True, False)
    assert first.json()["base_path"] == "/data/lake/trips"
    assert first.json()["thresholds"] == {
        "compaction_delta_commits": 5,
        "clean_commits": 10,
        "clustering_commits": 0,
        "metadata_compaction_delta_commits": 10,
        "log_compaction_delta_commits": 0,
        "archival_commits": 11,
        "ttl_interval_hours": 24.0,
    }
    clash = client.post(url, json={**body, "base_path": "/elsewhere"})
    assert clash.status_code == 409
    assert clash.json()["error"]["code"] == "table_conflict"


def test_register_reads_hoodie_properties(client: TestClient, mor_table: HudiWriter) -> None:
    body = {"db_name": "lake", "table_name": "trips", "base_path": mor_table.table.base_path}
    table = client.post("/v1/hoodie/service/register", json=body).json()
    assert (table["table_type"], table["table_version"]) == ("MERGE_ON_READ", 6)


def test_submit_twice_returns_the_same_operation(client: TestClient) -> None:
    register(client)
    at = instant()
    body: dict[str, Any] = {
        "instant": at,
        "owner": "ann",
        "queue": "etl",
        "resource": "spark:4g,8g",
        "parallelism": 8,
        "execution_engine": "SPARK",
        "extra_params": {"spark.executor.cores": 2, "spark.speculation": False},
        "priority": 5,
        "max_retries": 2,
        "retry_on_error": False,
        "cluster": "ignored-unknown-field",
    }
    first = submit(client, **body)
    again = submit(client, **body)
    assert (first.status_code, again.status_code) == (201, 200)
    one, two = first.json(), again.json()
    assert one["id"] == two["id"] and (one["created"], two["created"]) == (True, False)
    assert (one["action"], one["instant"], one["status"]) == ("compaction", at, "SCHEDULED")
    assert (one["resource"], one["queue"], one["priority"], one["max_retries"]) == (
        "4g:8g",
        "etl",
        5,
        2,
    )
    assert one["extra_params"] == {"spark.executor.cores": "2", "spark.speculation": "false"}
    assert (one["db_name"], one["table_name"], one["retry_on_error"]) == ("lake", "trips", False)


@pytest.mark.parametrize(
    ("given", "stored"),
    [("4g:4g", "4g:4g"), ("spark:4g,4g", "4g:4g"), ("4G", "4g:4g"), ("512m:2g", "512m:2g")],
)
def test_resource_spellings_are_normalised(client: TestClient, given: str, stored: str) -> None:
    register(client)
    response = submit(client, "clean", resource=given)
    assert response.status_code == 201, response.text
    assert response.json()["resource"] == stored


def test_submit_without_instant_is_plan_less_and_unique(client: TestClient) -> None:
    register(client)
    first, again = submit(client, "cluster"), submit(client, "cluster")
    assert first.json()["instant"] is None and first.json()["id"] == again.json()["id"]
    assert (first.status_code, again.status_code) == (201, 200)


def test_submit_errors(client: TestClient) -> None:
    assert submit(client).status_code == 404  # table not registered
    register(client, table_type="COPY_ON_WRITE")
    refused = submit(client, "compact")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "unsupported_action"
    for field, value in [
        ("resource", "lots"),
        ("resource", "4g:4g:4g"),
        ("execution_engine", "flink"),
        ("parallelism", 0),
        ("instant", "2026"),
        ("extra_params", {"a": {"nested": 1}}),
    ]:
        response = submit(client, "clean", **{field: value})
        assert response.status_code == 422, (field, response.text)
        assert response.json()["error"]["field"] == f"body.{field}"


def test_remove(client: TestClient) -> None:
    register(client)
    at = instant()
    op = submit(client, instant=at).json()
    body = {"db_name": "lake", "table_name": "trips", "instant": at}
    removed = client.post("/v1/hoodie/service/compact/remove", json=body)
    assert removed.status_code == 200
    assert (removed.json()["status"], removed.json()["is_deleted"]) == ("CANCELLED", True)
    assert client.post("/v1/hoodie/service/compact/remove", json=body).status_code == 200
    listed = client.get("/v1/operations").json()["items"]
    assert op["id"] not in [o["id"] for o in listed]
    missing = client.post("/v1/hoodie/service/compact/remove", json={**body, "instant": instant()})
    assert missing.status_code == 404


def test_client_request_two_instants_then_repeat(
    client: TestClient, mor_table: HudiWriter, session: Session
) -> None:
    base = mor_table.table.base_path
    a, b = instant(), instant()
    params = client_params(
        base,
        instant=f"{a},{b}",
        extra_params="spark.executor.cores=1;spark.sql.adaptive.enabled=x=y",
    )
    first = client.get("/v1/hoodie/service/compact", params=params)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["table_created"] is True
    assert [(o["instant"], o["created"]) for o in body["operations"]] == [(a, True), (b, True)]
    op = body["operations"][0]
    # Hudi's defaults for the deploy settings the writer left unset: the table's and engine's
    assert (op["resource"], op["parallelism"], op["owner"], op["queue"]) == (
        None,
        None,
        None,
        "default",
    )
    assert op["extra_params"] == {"spark.executor.cores": "1", "spark.sql.adaptive.enabled": "x=y"}
    again = client.get("/v1/hoodie/service/compact", params=params).json()
    assert again["table_created"] is False
    assert [(o["id"], o["created"]) for o in again["operations"]] == [
        (o["id"], False) for o in body["operations"]
    ]
    assert session.scalar(select(func.count()).select_from(Operation)) == 2


def test_client_deploy_settings_other_than_hudis_defaults_are_kept(
    client: TestClient, mor_table: HudiWriter
) -> None:
    """A value the writer chose is kept; Hudi's default for it means the table's (owner,
    queue) or the engine's (memory, parallelism): a resident worker can run the operation."""
    base = mor_table.table.base_path
    chosen = client_params(
        base, instant=instant(), username="etl", queue="nightly", resource="spark:8g,2g"
    )
    op = client.get("/v1/hoodie/service/compact", params={**chosen, "parallelism": "8"}).json()
    assert [
        (o["owner"], o["queue"], o["resource"], o["parallelism"]) for o in op["operations"]
    ] == [("etl", "nightly", "8g:2g", 8)]
    table = client.patch(f"/v1/tables/{op['table_id']}", json={"queue": "lake", "owner": "data"})
    assert table.status_code == 200, table.text
    defaults = client_params(base, instant=instant(), username="DEFAULT", resource="Spark:4g,4g")
    [op] = client.get("/v1/hoodie/service/compact", params=defaults).json()["operations"]
    assert (op["owner"], op["queue"], op["resource"], op["parallelism"]) == (
        None,
        "lake",
        None,
        None,
    )


def test_client_request_with_no_pending_instants_is_a_no_op(client: TestClient) -> None:
    register(client)
    response = client.get("/v1/hoodie/service/clean", params=client_params("/data/lake/trips"))
    assert response.status_code == 200 and response.json()["operations"] == []


def test_client_cancel_and_register(client: TestClient, mor_table: HudiWriter) -> None:
    base = mor_table.table.base_path
    registered = client.get(
        "/v1/hoodie/service/cluster",
        params=client_params(base, action="register", db_name="", table_name=""),
    ).json()
    assert registered["table_created"] is True
    table = client.get(f"/v1/tables/{registered['table_id']}").json()
    assert (table["db_name"], table["table_name"], table["table_type"]) == (
        "lake",
        "trips",
        "MERGE_ON_READ",
    )
    a, b = instant(), instant()
    client.get("/v1/hoodie/service/cluster", params=client_params(base, instant=a))
    cancel = client_params(base, instant=f"{a},{b}", action="CANCEL")
    first = client.get("/v1/hoodie/service/cluster", params=cancel).json()
    assert [o["status"] for o in first["operations"]] == ["CANCELLED"]
    assert first["missing_instants"] == [b]
    again = client.get("/v1/hoodie/service/cluster", params=cancel)
    assert again.status_code == 200 and again.json()["operations"][0]["status"] == "CANCELLED"


def test_client_bad_parameters_are_422(client: TestClient) -> None:
    for name, value in [
        ("action", "EXPLODE"),
        ("instant", "20260101000000001,nope"),
        ("parallelism", "many"),
        ("resource", "spark:lots"),
        ("execution_engine", "flink"),
        ("extra_params", "novalue"),
    ]:
        params = client_params("/data/lake/trips", **{name: value})
        response = client.get("/v1/hoodie/service/compact", params=params)
        assert response.status_code == 422, (name, response.text)
        assert response.json()["error"]["field"] == f"query.{name}"


def test_client_unknown_table_without_auto_register_is_404(make_client: MakeClient) -> None:
    client = make_client(auto_register=False)
    params = client_params("/data/nowhere", instant=instant())
    assert client.get("/v1/hoodie/service/compact", params=params).status_code == 404
