"""Role matrix: viewers read, writers also notify and submit, admins also change tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, WRITER, MakeClient, bearer
from tests.api.helpers import callback_payload, instant

if TYPE_CHECKING:
    from starlette.testclient import TestClient

READ, WRITE, ADMIN_ONLY = "viewer", "writer", "admin"
RANK = {READ: 0, WRITE: 1, ADMIN_ONLY: 2}
TOKENS = {READ: VIEWER, WRITE: WRITER, ADMIN_ONLY: ADMIN}
TABLE = {"db_name": "lake", "table_name": "trips", "base_path": "/data/lake/trips"}

# (method, path, json body, query params, least role)
ENDPOINTS: list[tuple[str, str, Any, Any, str]] = [
    ("GET", "/v1/tables", None, None, READ),
    ("GET", "/v1/tables/{table}", None, None, READ),
    ("GET", "/v1/operations", None, None, READ),
    ("GET", "/v1/operations/{op}", None, None, READ),
    ("GET", "/v1/operations/{op}/attempts", None, None, READ),
    ("POST", "/v1/tables?pending=true", TABLE, None, WRITE),
    ("POST", "/v1/hoodie/service/register?pending=true", TABLE, None, WRITE),
    ("POST", "/v1/hoodie/service/clean/submit", {**TABLE, "instant": "{instant}"}, None, WRITE),
    ("GET", "/v1/hoodie/service/compact", None, {"basepath": TABLE["base_path"]}, WRITE),
    ("POST", "/v1/operations/{op}/cancel", None, None, WRITE),
    ("PATCH", "/v1/tables/{table}", {"priority": 1}, None, ADMIN_ONLY),
    ("DELETE", "/v1/tables/{gone}", None, None, ADMIN_ONLY),
]


@pytest.fixture
def secured(make_client: MakeClient) -> tuple[TestClient, dict[str, str]]:
    client = make_client(auth_tokens=AUTH_TOKENS)
    admin = bearer(ADMIN)
    url = "/v1/tables?pending=true"
    table = client.post(url, json=TABLE, headers=admin).json()
    gone = client.post(
        url, json={**TABLE, "table_name": "gone", "base_path": "/gone"}, headers=admin
    ).json()
    op = client.post(
        "/v1/hoodie/service/clean/submit", json={**TABLE, "instant": instant()}, headers=admin
    ).json()
    return client, {"table": str(table["id"]), "op": str(op["id"]), "gone": str(gone["id"])}


@pytest.mark.parametrize(("method", "path", "body", "params", "least"), ENDPOINTS)
def test_role_matrix(
    secured: tuple[TestClient, dict[str, str]],
    method: str,
    path: str,
    body: Any,
    params: Any,
    least: str,
) -> None:
    client, ids = secured
    url = path.format(**ids)
    if isinstance(body, dict) and body.get("instant") == "{instant}":
        body = {**body, "instant": instant()}

    def call(headers: dict[str, str]) -> int:
        return client.request(method, url, json=body, params=params, headers=headers).status_code

    missing = client.request(method, url, json=body, params=params)
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert missing.json()["error"]["code"] == "unauthorized"
    assert call(bearer("who-knows")) == 401
    for role, token in sorted(TOKENS.items(), key=lambda kv: RANK[kv[0]]):
        status = call(bearer(token))
        if RANK[role] < RANK[least]:
            assert status == 403, (role, status)
        else:
            assert status < 400, (role, status)


def test_probes_and_metrics_need_no_token(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    for path in ("/healthz", "/readyz", "/metrics", "/docs", "/openapi.json"):
        assert client.get(path).status_code == 200, path


def test_callback_key_or_writer_token(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    url = "/v1/hoodie/service/commit"
    payload = callback_payload(instant())
    key = {"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}
    assert client.post(url, json=payload, headers=key).status_code == 200
    assert client.post(url, json=payload, headers=bearer(WRITER)).status_code == 200
    assert client.post(url, json=payload, headers=bearer(VIEWER)).status_code == 403
    assert client.post(url, json=payload).status_code == 401


def test_auth_off_warns_once(make_client: MakeClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="tms.api.app"):
        client = make_client()
        client.get("/v1/tables")
        client.get("/v1/tables")
    warnings = [r for r in caplog.records if "authentication is OFF" in r.getMessage()]
    assert len(warnings) == 1
