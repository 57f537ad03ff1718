"""Bad input gets a 4xx JSON error naming the field, never a 500 or a stack trace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.api.helpers import register

if TYPE_CHECKING:
    from starlette.testclient import TestClient

SUBMIT = "/v1/hoodie/service/compact/submit"
GOOD = {"db_name": "lake", "table_name": "trips"}


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"{not json", "application/json"),
        (b"[1, 2, 3]", "application/json"),
        (b"\xff\xfe\x00", "application/json"),
        (b"db_name=lake", "text/plain"),
        (b"", "application/json"),
        (b'"a string"', "application/json"),
        (b"null", "application/json"),
    ],
)
def test_garbage_bodies(client: TestClient, content: bytes, content_type: str) -> None:
    """Not JSON, or not an object: one answer, 422 `validation_error` on `body`."""
    response = client.post(SUBMIT, content=content, headers={"Content-Type": content_type})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", "body")
    assert error["message"].startswith("body")
    assert "Traceback" not in response.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**GOOD, "priority": "high"}, "body.priority"),
        ({**GOOD, "priority": 10**30}, "body.priority"),
        ({**GOOD, "parallelism": 2**63}, "body.parallelism"),
        ({**GOOD, "max_retries": -1}, "body.max_retries"),
        ({**GOOD, "retry_on_error": "sometimes"}, "body.retry_on_error"),
        ({**GOOD, "resource": "4q:4q"}, "body.resource"),
        ({**GOOD, "resource": "0g"}, "body.resource"),
        ({**GOOD, "resource": 4}, "body.resource"),
        ({**GOOD, "execution_engine": "hive"}, "body.execution_engine"),
        ({**GOOD, "extra_params": [1, 2]}, "body.extra_params"),
        ({**GOOD, "extra_params": "k"}, "body.extra_params"),
        ({**GOOD, "db_name": "lake\x00"}, "body.db_name"),
        ({**GOOD, "db_name": ""}, "body.db_name"),
        ({**GOOD, "table_name": "x" * 300}, "body.table_name"),
        ({"table_name": "trips"}, "body.db_name"),
        ({**GOOD, "queue": {"a": 1}}, "body.queue"),
    ],
)
def test_wrong_types_and_values_name_the_field(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    register(client)
    response = client.post(SUBMIT, json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", field)
    assert error["message"].startswith(field)
    assert error["errors"][0]["field"] == field


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/operations/99999999999999999999999", 422, "validation_error"),
        ("GET", "/v1/operations/-1", 422, "validation_error"),
        ("GET", "/v1/operations/abc", 422, "validation_error"),
        ("GET", "/v1/tables/123456", 404, "not_found"),
        ("GET", "/v1/nothing-here", 404, "not_found"),
        ("PUT", "/v1/tables", 405, "method_not_allowed"),
        ("GET", "/v1/operations?table_id=99999999999999999999", 422, "validation_error"),
        ("GET", "/v1/operations?status=DONE", 422, "validation_error"),
        ("GET", "/v1/tables?limit=0", 422, "validation_error"),
    ],
)
def test_ids_routes_and_queries(
    client: TestClient, method: str, path: str, status: int, code: str
) -> None:
    response = client.request(method, path)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/tables", "GET, POST"),
        ("/v1/tables/1", "DELETE, GET, PATCH"),
        ("/v1/workers", "GET, POST"),
        ("/v1/workers/w-1", "DELETE"),
        ("/v1/jobs/attempts/1/table-lock", "DELETE, POST"),
        ("/v1/operations/1/cancel", "POST"),
        ("/v1/hoodie/view/timeline/instants/all", "GET, POST"),
        ("/v1/hoodie/service/commit", "POST"),
    ],
)
@pytest.mark.parametrize("method", ["OPTIONS", "PUT"])
def test_a_method_a_path_does_not_take_is_405_naming_every_method_it_takes(
    client: TestClient, method: str, path: str, allowed: str
) -> None:
    response = client.request(method, path)
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == allowed
    error = response.json()["error"]
    assert error["code"] == "method_not_allowed" and allowed in error["message"]


def test_error_shape_for_store_errors(client: TestClient) -> None:
    register(client)
    clash = client.post(
        "/v1/tables?pending=true",
        json={"db_name": "lake", "table_name": "trips", "base_path": "/else"},
    )
    assert clash.status_code == 409
    assert clash.json() == {
        "error": {
            "code": "table_conflict",
            "message": "table lake.trips is registered with base path /data/lake/trips, not /else",
            "field": None,
        }
    }
