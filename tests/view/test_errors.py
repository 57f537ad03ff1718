"""Refusals: a clear 4xx naming the parameter, never a 500; no bearer token asked (Hudi's
client sends none), only registered tables, and nothing while the timeline server is off."""

from __future__ import annotations

import os
from pathlib import Path

from starlette.testclient import TestClient

from tests.view.conftest import MakeClient, Register, own_table
from tests.view.java_client import HEADERS, JavaViewClient


def error(response: object) -> dict[str, str]:
    body = response.json()  # type: ignore[attr-defined]
    return body["error"]


def test_bad_requests_name_the_parameter(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = tmp_path / "trips"
    own_table(root, 6)
    client = JavaViewClient(http, register(root), root)

    missing = http.get("/v1/hoodie/view/slices/partition/latest/?partition=eu", headers=HEADERS)
    assert missing.status_code == 400 and error(missing)["field"] == "basepath"

    unknown = http.get(
        "/v1/hoodie/view/slices/partition/latest/",
        params={"basepath": f"file:{tmp_path}/elsewhere", "partition": "eu"},
        headers=HEADERS,
    )
    assert unknown.status_code == 404
    assert error(unknown)["field"] == "basepath"
    assert "not a registered table" in error(unknown)["message"]

    for path, field in [
        ("slices/file/latest/", "fileid"),
        ("datafile/latest/partition", "fileid"),
        ("slices/beforeoron/latest/", "maxinstant"),
        ("datafiles/beforeoron/latest/", "maxinstant"),
        ("slices/merged/beforeoron/latest/", "maxinstant"),
        ("datafile/on/latest/", "instant"),
        ("slices/range/latest/", "instants"),
    ]:
        response = client.raw(path, partition="eu")
        assert response.status_code == 400, path
        assert error(response)["field"] == field, path

    assert client.raw("no/such/call").status_code == 404
    assert client.raw("refresh/", method="GET").status_code == 404
    assert client.raw("slices/partition/latest/", method="POST", partition="eu").status_code == 404


def test_no_token_is_asked_and_the_switch_turns_it_off(
    tmp_path: Path, make_client: MakeClient, register: Register
) -> None:
    root = tmp_path / "trips"
    own_table(root, 6)
    base_path = register(root)
    guarded = make_client(auth_tokens="admin:adm1n-7f3c9e")
    assert guarded.get("/v1/tables").status_code == 401
    assert JavaViewClient(guarded, base_path, root).get_latest_file_slices("eu")

    off = make_client(timeline_server_enabled=False)
    assert (
        JavaViewClient(off, base_path, root)
        .raw("slices/partition/latest/", partition="eu")
        .status_code
        == 404
    )


def test_a_table_whose_storage_is_gone_is_a_502_not_a_500(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = tmp_path / "trips"
    own_table(root, 6)
    client = JavaViewClient(http, register(root), root)
    (root / ".hoodie" / "hoodie.properties").unlink()
    response = client.raw("slices/partition/latest/", partition="eu")
    assert response.status_code == 502
    assert str(root) not in response.text, "storage errors stay in the logs"


def test_storage_that_never_answers_is_504_within_the_storage_timeout(
    tmp_path: Path, make_client: MakeClient, register: Register
) -> None:
    """A table whose `hoodie.properties` is a FIFO nobody writes: building its view blocks
    for good. The call is answered 504 after the storage timeout (the client then reads
    storage itself), and the service goes on answering."""
    root = tmp_path / "trips"
    own_table(root, 6)
    http = make_client(storage_timeout_seconds=1)
    client = JavaViewClient(http, register(root), root)
    properties = root / ".hoodie" / "hoodie.properties"
    properties.rename(tmp_path / "hoodie.properties")
    os.mkfifo(properties)
    try:
        response = client.raw("slices/partition/latest/", partition="eu")
        assert response.status_code == 504, response.text
        assert response.json()["error"]["code"] == "storage_timeout"
        assert http.get("/healthz").status_code == 200
    finally:
        os.close(os.open(properties, os.O_WRONLY | os.O_NONBLOCK))
