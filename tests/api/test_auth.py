"""Role matrix: viewers read, writers also notify and submit, admins also change tables."""

from __future__ import annotations

import hashlib
import itertools
from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, WRITER, MakeClient, bearer
from tests.api.helpers import callback_payload, instant
from tms.base_path import within
from tms.config import DEFAULT_CALLBACK_KEY

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


CALLBACK_URL = "/v1/hoodie/service/commit"
DEFAULT_KEY = {"HUDI-CALLBACK-KEY": DEFAULT_CALLBACK_KEY}


def test_callback_key_or_writer_token(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS, callback_keys="k-3f9a1c")
    payload = callback_payload(instant())
    key = {"HUDI-CALLBACK-KEY": "k-3f9a1c"}
    assert client.post(CALLBACK_URL, json=payload, headers=key).status_code == 200
    assert client.post(CALLBACK_URL, json=payload, headers=bearer(WRITER)).status_code == 200
    assert client.post(CALLBACK_URL, json=payload, headers=bearer(VIEWER)).status_code == 403
    assert client.post(CALLBACK_URL, json=payload).status_code == 401


def _tables(client: TestClient) -> list[str]:
    listed = client.get("/v1/tables", headers=bearer(ADMIN)).json()["items"]
    return sorted(t["base_path"] for t in listed)


def test_hudi_default_key_is_refused_with_auth_on(make_client: MakeClient) -> None:
    """Anyone knows Hudi's default key: with auth on it registers no table and notifies
    nothing, and it never opens another route."""
    client = make_client(auth_tokens=AUTH_TOKENS)
    refused = client.post(CALLBACK_URL, json=callback_payload(instant()), headers=DEFAULT_KEY)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"
    assert "TMS_CALLBACK_KEYS" in refused.json()["error"]["message"]
    assert _tables(client) == []
    register = client.post("/v1/hoodie/service/register", json=TABLE, headers=DEFAULT_KEY)
    assert register.status_code == 401
    submit = client.post(
        "/v1/hoodie/service/clean/submit", json={**TABLE, "instant": instant()}, headers=DEFAULT_KEY
    )
    assert submit.status_code == 401
    assert _tables(client) == []


def test_hudi_default_key_works_with_auth_on_when_named(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS, callback_keys=DEFAULT_CALLBACK_KEY)
    accepted = client.post(CALLBACK_URL, json=callback_payload(instant()), headers=DEFAULT_KEY)
    assert accepted.status_code == 200, accepted.text


def test_hudi_default_key_works_with_auth_off(make_client: MakeClient) -> None:
    client = make_client()
    accepted = client.post(CALLBACK_URL, json=callback_payload(instant()), headers=DEFAULT_KEY)
    assert accepted.status_code == 200, accepted.text
    assert client.post(CALLBACK_URL, json=callback_payload(instant())).status_code == 401


def test_scoped_keys_notify_only_under_their_prefixes(make_client: MakeClient) -> None:
    client = make_client(
        auth_tokens=AUTH_TOKENS, callback_keys="k1-8e2d@/lake/a,k1-8e2d@/lake/b,k2-51c0"
    )
    k1, k2 = {"HUDI-CALLBACK-KEY": "k1-8e2d"}, {"HUDI-CALLBACK-KEY": "k2-51c0"}
    names = itertools.count()

    def notify(base_path: str, key: dict[str, str]) -> Any:
        name = f"t{next(names)}"  # auto-registration names a table per base path
        payload = callback_payload(instant(), base_path=base_path, table_name=name)
        return client.post(CALLBACK_URL, json=payload, headers=key)

    assert notify("/lake/a/sales", k1).status_code == 200
    assert notify("/lake/b", k1).status_code == 200
    outside = {  # as sent -> as the refusal names it (normalized)
        "/lake/a2": "/lake/a2",
        "/lake/a/../hr": "/lake/hr",
        "/lake": "/lake",
        "s3://bucket/lake/a/t": "s3://bucket/lake/a/t",
    }
    for sent, named in outside.items():
        refused = notify(sent, k1)
        assert refused.status_code == 403, (sent, refused.text)
        error = refused.json()["error"]
        assert (error["code"], error["field"]) == ("forbidden", "body.basePath")
        assert named in error["message"]
    assert notify("/elsewhere/t", k2).status_code == 200  # unscoped
    assert _tables(client) == ["/elsewhere/t", "/lake/a/sales", "/lake/b"]


def test_start_log_names_fingerprints_and_prefixes_not_secrets(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-key-0a9f"
    with caplog.at_level("INFO", logger="tms.api.auth"):
        make_client(
            auth_tokens=AUTH_TOKENS,
            callback_keys=f"{secret}@/lake/a,{secret}@/lake/b,{DEFAULT_CALLBACK_KEY}",
        )
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert secret not in text
    fingerprint = hashlib.sha256(secret.encode()).hexdigest()[:8]
    assert f"sha256 {fingerprint}… is accepted for /lake/a, /lake/b" in text
    assert f"default key {DEFAULT_CALLBACK_KEY} is accepted for any base path" in text


def test_start_log_warns_when_no_key_is_accepted(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="tms.api.auth"):
        make_client(auth_tokens=AUTH_TOKENS)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("no HUDI-CALLBACK-KEY is accepted" in w for w in warnings)


@pytest.mark.parametrize(
    ("base_path", "prefix", "inside"),
    [
        ("/lake/sales", "/lake/sales", True),
        ("/lake/sales/t1", "/lake/sales/", True),
        ("//lake//sales/./t1", "/lake/sales", True),
        ("/lake/sales2", "/lake/sales", False),
        ("/lake/sales/../hr", "/lake/sales", False),
        ("/lake", "/lake/sales", False),
        ("lake/sales/t", "/lake/sales", False),
        ("s3://bucket/lake/sales/t", "s3://bucket/lake/sales", True),
        ("S3://bucket/lake/sales/t", "s3://bucket/lake/sales", True),
        ("s3://other/lake/sales/t", "s3://bucket/lake/sales", False),
        ("s3://bucket/lake/sales/../../hr", "s3://bucket/lake/sales", False),
        ("/lake/sales/t", "s3://bucket/lake/sales", False),
        ("file:///lake/sales/t", "/lake/sales", True),
        (
            "abfs://c@acct.dfs.core.windows.net/lake/a",
            "abfs://c@acct.dfs.core.windows.net/lake",
            True,
        ),
    ],
)
def test_prefixes_match_whole_components_of_normalized_paths(
    base_path: str, prefix: str, inside: bool
) -> None:
    assert within(base_path, prefix) is inside


def test_auth_off_warns_once(make_client: MakeClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="tms.api.app"):
        client = make_client()
        client.get("/v1/tables")
        client.get("/v1/tables")
    warnings = [r for r in caplog.records if "authentication is OFF" in r.getMessage()]
    assert len(warnings) == 1
