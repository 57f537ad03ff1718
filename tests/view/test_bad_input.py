"""Malformed queries against every endpoint of the view: each is a 4xx with the API's error
body (naming the parameter at fault), never a 5xx. These routes are left out of the OpenAPI
document, so the schema fuzz suite cannot reach them: this is their bad-input guard."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest
from starlette.testclient import TestClient

from tests.view.conftest import Register, own_table
from tests.view.java_client import HEADERS
from tms.view.endpoints import ENDPOINTS

PREFIX = "/v1/hoodie/view"
OVERLONG = "9" * 5000
VALUED = ("partition", "fileid", "maxinstant", "mininstant", "instant", "instants")
FRESHNESS = ("lastinstantts", "timelinehash")
BAD_VALUES = {
    "partition": ["..", "../..", "eu/../../etc", "/etc", "eu\x00x", OVERLONG],
    "fileid": ["..", "../x", "a/b", "\x00", OVERLONG],
    "maxinstant": ["garbage", "..", "-1", "20240101\x00", OVERLONG],
    "mininstant": ["garbage", "..", OVERLONG],
    "instant": ["garbage", "..", OVERLONG],
    "instants": ["garbage", ",", "..,..", ",".join(["20240101000000"] * 1100)],
    "lastinstantts": ["garbage", "..", OVERLONG],
    "timelinehash": ["not-hex", "..", OVERLONG],
}


@pytest.fixture
def base_path(tmp_path: Path, register: Register) -> str:
    root = tmp_path / "trips"
    own_table(root, 6)
    return register(root)


def good(base_path: str) -> dict[str, str]:
    """A well-formed query every endpoint accepts (freshness checks switched off)."""
    return {
        "basepath": base_path,
        "partition": "eu",
        "fileid": "f",
        "maxinstant": "99991231235959999",
        "mininstant": "0",
        "instant": "0",
        "instants": "0",
        "includependingcompaction": "true",
        "refreshoff": "true",
    }


def send(http: TestClient, method: str, path: str, query: dict[str, str]) -> object:
    return http.request(method, f"{PREFIX}/{path}?{urlencode(query)}", headers=HEADERS)


def refused(response: object, field: str | None) -> None:
    """A 4xx with the API's error body, naming `field` when one is at fault."""
    status = response.status_code  # type: ignore[attr-defined]
    text = response.text  # type: ignore[attr-defined]
    assert 400 <= status < 500, (status, text)
    error = response.json()["error"]  # type: ignore[attr-defined]
    assert error["code"] and error["message"], text
    if field is not None:
        assert error["field"] == field, text


@pytest.mark.parametrize("path", sorted(ENDPOINTS))
def test_every_endpoint_refuses_malformed_queries(
    path: str, http: TestClient, base_path: str
) -> None:
    method = ENDPOINTS[path].method
    query = good(base_path)
    ok = send(http, method, path, query)
    assert ok.status_code == 200, ok.text  # type: ignore[attr-defined]

    refused(
        send(http, method, path, {k: v for k, v in query.items() if k != "basepath"}), "basepath"
    )
    for other in ("", "file:/nowhere/at/all", "file:/..", OVERLONG):
        refused(send(http, method, path, {**query, "basepath": other}), "basepath")
    for name in (*VALUED, *FRESHNESS):
        for value in BAD_VALUES[name]:
            refused(send(http, method, path, {**query, name: value}), name)
    for name in FRESHNESS:  # checked even when the refresh check is off
        refused(send(http, method, path, {**query, "refreshoff": "false", name: "garbage"}), name)

    wrong = "POST" if method == "GET" else "GET"
    refused(send(http, wrong, path, query), None)
    for other in ("PUT", "DELETE", "PATCH"):
        refused(send(http, other, path, query), None)
