"""The API's contract: what bad text and bad bodies get, and what the OpenAPI document
promises (error responses, nullability, enums) and `/docs` serves."""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from starlette.requests import Request

from tests.api.conftest import ADMIN, AUTH_TOKENS, MakeClient, bearer
from tests.api.helpers import callback_payload, instant, register, submit
from tests.store.helpers import claim
from tms.api.errors import error_response
from tms.store import issue_attempt_token

if TYPE_CHECKING:
    from starlette.testclient import TestClient

SUBMIT = "/v1/hoodie/service/compact/submit"
LONE = "s\ud800"
"""A lone surrogate: valid in a JSON string escape, not valid Unicode text."""
ADMIN_AUTH = bearer(ADMIN)


@pytest.fixture
def admin(make_client: MakeClient) -> TestClient:
    """Auth on; requests carry the admin token."""
    client = make_client(auth_tokens=AUTH_TOKENS)
    client.headers.update(ADMIN_AUTH)
    return client


def _send(client: TestClient, method: str, path: str, body: Any) -> Any:
    """`body` as ASCII JSON, so a lone surrogate travels as its `\\ud800` escape."""
    content = json.dumps(body).encode("ascii")
    return client.request(
        method, path, content=content, headers={"Content-Type": "application/json"}
    )


def _assert_invalid(response: Any, field: str) -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", field)
    assert "Traceback" not in response.text


TABLE = {"db_name": "lake", "table_name": "other", "base_path": "/data/lake/other"}
CALLBACK = "/v1/hoodie/service/commit"
COMMIT = callback_payload(instant())
NAMES = {"db_name": "lake", "table_name": "trips"}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/hoodie/service/register", {**TABLE, "db_name": LONE}, "body.db_name"),
        ("POST", "/v1/hoodie/service/register", {**TABLE, "owner": LONE}, "body.owner"),
        ("POST", "/v1/tables", {**TABLE, "base_path": LONE}, "body.base_path"),
        ("POST", "/v1/tables", {**TABLE, "table_name": LONE}, "body.table_name"),
        (
            "POST",
            "/v1/tables",
            {**TABLE, "policy": {"clustering_sort_columns": [LONE]}},
            "body.policy.clustering_sort_columns.0",
        ),
        ("POST", SUBMIT, {**NAMES, "queue": LONE}, "body.queue"),
        ("POST", SUBMIT, {**NAMES, "resource": LONE}, "body.resource"),
        ("POST", SUBMIT, {**NAMES, "extra_params": {LONE: "v"}}, "body.extra_params"),
        ("POST", SUBMIT, {**NAMES, "extra_params": {"k": LONE}}, "body.extra_params"),
        ("POST", SUBMIT, {**NAMES, "extra_params": f"k={LONE}"}, "body.extra_params"),
        ("POST", "/v1/hoodie/service/clean/remove", {**NAMES, "instant": LONE}, "body.instant"),
        ("PATCH", "/v1/tables/{id}", {"owner": LONE}, "body.owner"),
        ("PATCH", "/v1/tables/{id}", {"queue": LONE}, "body.queue"),
        ("POST", CALLBACK, {**COMMIT, "basePath": f"/data/{LONE}"}, "body.basePath"),
        ("POST", CALLBACK, {**COMMIT, "tableName": LONE}, "body.tableName"),
        ("POST", CALLBACK, {**COMMIT, "commitTime": LONE}, "body.commitTime"),
        (
            "POST",
            CALLBACK,
            {**COMMIT, "hoodieWriteStat": [{"path": LONE}]},
            "body.hoodieWriteStat.0.path",
        ),
    ],
)
def test_a_lone_surrogate_in_any_text_field_is_a_422_naming_it(
    admin: TestClient, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    table_id = register(admin)["id"]
    _assert_invalid(_send(admin, method, path.format(id=table_id), body), field)


def test_job_reports_with_a_lone_surrogate_are_422(admin: TestClient, session: Session) -> None:
    register(admin)
    submit(admin).raise_for_status()
    (claimed,) = claim(session, limit=1)
    token = issue_attempt_token(session, claimed.attempt)
    session.commit()
    url = f"/v1/jobs/attempts/{claimed.attempt.id}/result"
    job = bearer(token)
    for body, field in [
        ({"outcome": "FAILED", "error": LONE}, "body.error"),
        ({"outcome": "FAILED", "spark_app_id": LONE}, "body.spark_app_id"),
        ({"outcome": "SUCCEEDED", "figures": {"files": [LONE]}}, "body.figures"),
        ({"outcome": "SUCCEEDED", "figures": {LONE: 1}}, "body.figures"),
    ]:
        response = admin.post(
            url,
            content=json.dumps(body).encode("ascii"),
            headers={**job, "Content-Type": "application/json"},
        )
        _assert_invalid(response, field)


WORKER = {
    "id": "w-1",
    "host": "h",
    "pid": 42,
    "spark_master": "local[1]",
    "queues": ["default"],
    "slots": 1,
}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/workers", {**WORKER, "pid": False}, "body.pid"),
        ("POST", "/v1/workers", {**WORKER, "slots": True}, "body.slots"),
        ("POST", "/v1/workers/w-1/claim", {"free": 1, "wait_seconds": False}, "body.wait_seconds"),
        ("POST", "/v1/workers/w-1/claim", {"free": True}, "body.free"),
        ("POST", SUBMIT, {**NAMES, "parallelism": True}, "body.parallelism"),
        ("POST", SUBMIT, {**NAMES, "max_retries": False}, "body.max_retries"),
        ("POST", SUBMIT, {**NAMES, "priority": False}, "body.priority"),
        ("PATCH", "/v1/tables/{id}", {"priority": True}, "body.priority"),
        (
            "PATCH",
            "/v1/tables/{id}",
            {"policy": {"clean_retained": True}},
            "body.policy.clean_retained",
        ),
        (
            "PATCH",
            "/v1/tables/{id}",
            {"policy": {"notification_timeout_seconds": False}},
            "body.policy.notification_timeout_seconds",
        ),
        (
            "POST",
            CALLBACK,
            {**COMMIT, "hoodieWriteStat": [{"numWrites": True}]},
            "body.hoodieWriteStat.0.numWrites",
        ),
    ],
)
def test_a_boolean_is_not_a_number(
    admin: TestClient, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    table_id = register(admin)["id"]
    admin.post("/v1/workers", json=WORKER).raise_for_status()
    refused = admin.request(method, path.format(id=table_id), json=body)
    _assert_invalid(refused, field)
    assert refused.json()["error"]["errors"][0]["type"] in {"int_type", "float_type"}


def test_numbers_stay_numbers_where_they_are_valid(admin: TestClient) -> None:
    """Integers for integers, and for seconds too."""
    table_id = register(admin)["id"]
    admin.post("/v1/workers", json=WORKER).raise_for_status()
    claimed = admin.post("/v1/workers/w-1/claim", json={"free": 1, "wait_seconds": 0})
    assert claimed.status_code == 200, claimed.text
    policy = {"notification_timeout_seconds": 60, "clean_retained": 3}
    patched = admin.patch(f"/v1/tables/{table_id}", json={"priority": 5, "policy": policy})
    assert patched.status_code == 200, patched.text
    assert admin.post(SUBMIT, json={**NAMES, "parallelism": 2}).status_code in {200, 201}


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/tables?cursor=%C2%B2", "query.cursor"),  # '²' is a digit to str.isdigit
        ("/v1/operations?cursor=%D9%A1", "query.cursor"),  # Arabic-Indic one
        ("/v1/hoodie/service/compact?basepath=/data/x&instant=" + "%D9%A2" * 17, "query.instant"),
    ],
)
def test_non_ascii_digits_are_not_numbers(admin: TestClient, path: str, field: str) -> None:
    _assert_invalid(admin.get(path), field)


def test_an_instant_in_non_ascii_digits_is_refused(admin: TestClient) -> None:
    register(admin)
    _assert_invalid(_send(admin, "POST", SUBMIT, {**NAMES, "instant": "٢" * 17}), "body.instant")


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe\x00", b"\x80abc", b'{"db_name": "lake"', b"[1, 2"],
    ids=["broken", "utf16-bom", "not-utf8", "truncated", "array"],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/tables"),
        ("POST", "/v1/hoodie/service/register"),
        ("POST", SUBMIT),
        ("PATCH", "/v1/tables/1"),
        ("POST", "/v1/hoodie/service/commit"),
    ],
)
def test_a_body_that_is_not_json_is_a_422_on_the_body(
    admin: TestClient, method: str, path: str, content: bytes
) -> None:
    register(admin)
    response = admin.request(
        method, path, content=content, headers={"Content-Type": "application/json"}
    )
    _assert_invalid(response, "body")


def test_database_refusals_do_not_echo_the_driver() -> None:
    """A value PostgreSQL refuses is the client's fault (422), but the driver's own words
    stay in the log."""
    refused = psycopg.errors.InvalidTextRepresentation(
        'invalid input syntax for type json\nDETAIL: Token "secret" is invalid.'
    )
    exc = DBAPIError("INSERT INTO operation ...", {}, refused)
    request = Request({"type": "http", "method": "POST", "path": "/v1/x", "headers": []})
    response = asyncio.run(error_response(request, exc))
    assert response.status_code == 422
    body = bytes(response.body).decode()
    assert json.loads(body)["error"]["code"] == "validation_error"
    assert "syntax" not in body and "secret" not in body and "INSERT" not in body


# The OpenAPI document.


@pytest.fixture
def document(admin: TestClient) -> dict[str, Any]:
    response = admin.get("/openapi.json")
    assert response.status_code == 200
    result: dict[str, Any] = response.json()
    return result


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in {"get", "post", "patch", "delete", "put"}
    ]


def _error_schema(document: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    ref = response["content"]["application/json"]["schema"]["$ref"]
    result: dict[str, Any] = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return result


def test_every_guarded_route_documents_401_403_and_422_with_the_error_schema(
    document: dict[str, Any],
) -> None:
    for path, method, operation in _operations(document):
        if path in {"/healthz", "/readyz", "/metrics"}:
            continue
        responses = operation["responses"]
        needed = {"401", "422"} if path.startswith("/v1/jobs/") else {"401", "403", "422"}
        assert needed <= set(responses), (method, path, sorted(responses))
        for status in needed:
            schema = _error_schema(document, responses[status])
            assert schema["required"] == ["error"], (method, path, status)


def test_routes_with_ids_document_404_and_routes_with_bodies_413(
    document: dict[str, Any],
) -> None:
    for path, method, operation in _operations(document):
        responses = operation["responses"]
        if ("_id}" in path and "/jobs/" not in path) or path.endswith(("/submit", "/remove")):
            assert "404" in responses, (method, path)
        if "requestBody" in operation:
            assert "413" in responses, (method, path)


def test_patch_fields_are_not_declared_nullable(document: dict[str, Any]) -> None:
    """PATCH refuses `null` (leave a field out instead), so the schema must not offer it."""
    patch = document["components"]["schemas"]["TablePatch"]
    for name, field in patch["properties"].items():
        assert "anyOf" not in field or all(
            option.get("type") != "null" for option in field["anyOf"]
        ), name
        assert field.get("type") != "null", name


def test_patch_refuses_null_as_the_schema_says(admin: TestClient) -> None:
    table_id = register(admin)["id"]
    _assert_invalid(admin.patch(f"/v1/tables/{table_id}", json={"queue": None}), "body.queue")


def _parameter(document: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    (param,) = [p for p in document["paths"][path]["get"]["parameters"] if p["name"] == name]
    schema: dict[str, Any] = param["schema"]
    return schema


def test_enums_and_formats_are_in_the_schema(document: dict[str, Any]) -> None:
    client_action = _parameter(document, "/v1/hoodie/service/compact", "action")
    assert client_action["enum"] == ["REQUEST", "CANCEL", "REGISTER"]
    status = _parameter(document, "/v1/operations", "status")
    assert "COMPLETED" in status["anyOf"][0]["items"]["enum"]
    action = _parameter(document, "/v1/operations", "action")
    assert "compaction" in action["anyOf"][0]["enum"]
    for path in ("/v1/tables", "/v1/operations"):
        cursor = _parameter(document, path, "cursor")
        assert cursor["anyOf"][0]["pattern"] == "^([1-9][0-9]{0,17})?$"
    schemas = document["components"]["schemas"]

    def enum(schema: dict[str, Any]) -> list[str]:
        values: list[str] = schemas[schema["$ref"].rsplit("/", 1)[-1]]["enum"]
        return values

    assert "compaction" in enum(schemas["SpecOut"]["properties"]["action"])
    result = schemas["ResultOut"]["properties"]
    assert "COMPLETED" in enum(result["operation_status"])
    assert "LOST" in enum(result["attempt_outcome"])
    assert schemas["ClientOut"]["properties"]["action"]["enum"] == client_action["enum"]


def _schema(document: dict[str, Any], model: str, field: str) -> dict[str, Any]:
    """A body field's schema, its optional (`X | None`) form opened."""
    found: dict[str, Any] = document["components"]["schemas"][model]["properties"][field]
    return found.get("anyOf", [found])[0]


REFUSED_BY_THE_CHECKS = {
    # (model, field): values a semantic check refuses with 422
    ("TableIn", "db_name"): ["lake\x01", "a\x7fb", " ", ""],
    ("TableIn", "base_path"): ["data/lake/t", "../t", "t", "/data/\x00t"],
    ("SubmitIn", "owner"): ["ann\nbob"],
    ("SubmitIn", "resource"): ["0g", "4x", "4g:4g:4g", "spark:"],
}


def test_the_document_declares_what_the_checks_refuse(
    admin: TestClient, document: dict[str, Any]
) -> None:
    """A request that follows the document's patterns and enums is not refused for a
    control character, a relative base path, a memory size, an engine or a lock provider;
    and each value the document lists is taken."""
    table_id = register(admin)["id"]
    for (model, field), refused in REFUSED_BY_THE_CHECKS.items():
        pattern = _schema(document, model, field)["pattern"]
        url, body = ("/v1/tables?pending=true", TABLE) if model == "TableIn" else (SUBMIT, NAMES)
        for value in refused:
            _assert_invalid(admin.post(url, json={**body, field: value}), f"body.{field}")
            assert re.search(pattern, value) is None, (model, field, value)
    cursor = _parameter(document, "/v1/operations", "cursor")["anyOf"][0]["pattern"]
    assert [v for v in ("0", "00", "9" * 19, "x") if re.search(cursor, v)] == []
    engines = _schema(document, "SubmitIn", "execution_engine")["enum"]
    providers = _schema(document, "PolicyIn", "lock_provider")["enum"]
    assert "spark-worker" in engines and "postgres" in providers

    for provider in providers:
        policy = {"policy": {"lock_provider": provider}}
        assert admin.patch(f"/v1/tables/{table_id}", json=policy).status_code == 200, provider
    for engine, size in zip(engines, ["4g", "spark:4g,2g", "512m:1g"], strict=True):
        body = {**NAMES, "execution_engine": engine, "resource": size, "queue": engine}
        response = admin.post(SUBMIT, json=body)
        assert response.status_code in {200, 201}, response.text
    assert admin.get("/v1/operations", params={"cursor": "1"}).status_code == 200


def test_the_commit_callback_documents_its_errors(document: dict[str, Any]) -> None:
    responses = document["paths"]["/v1/hoodie/service/commit"]["post"]["responses"]
    for status in ("401", "403", "404", "409", "413", "422"):
        assert _error_schema(document, responses[status])["required"] == ["error"], status


# /docs without the internet.


def test_docs_serve_the_swagger_ui_from_the_package(admin: TestClient) -> None:
    page = admin.get("/docs")
    assert page.status_code == 200
    assert "cdn" not in page.text.lower() and "https://" not in page.text
    assert "/docs/assets/swagger-ui-bundle.js" in page.text
    script = admin.get("/docs/assets/swagger-ui-bundle.js")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.text
    css = admin.get("/docs/assets/swagger-ui.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
