"""Per-table storage options: set by an admin, write-only, checked against the table's scheme."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.api.conftest import (
    ADMIN,
    AUTH_TOKENS,
    CALLBACK_KEY,
    WRITER,
    MakeClient,
    bearer,
    client,
    make_client,
)
from tests.storage.conftest import ACCESS_KEY, SECRET_KEY, S3Endpoint
from tests.storage.test_write_and_compact_on_s3 import written_table
from tests.test_operator_cli import cli_for, start
from tms.hudi.table import HudiTable

if TYPE_CHECKING:
    from starlette.testclient import TestClient

__all__ = ["client", "make_client"]  # the API's fixtures, here next to the S3 server's

SECRET = SECRET_KEY


@pytest.fixture
def options(s3: S3Endpoint) -> dict[str, Any]:
    """Options that reach the S3 server (registration reads storage with them)."""
    return s3.storage_options


def add(client: TestClient, options: Any, *, base_path: str = "s3://lake/trips", **kw: Any) -> Any:
    body = {"db_name": "lake", "table_name": "trips", "base_path": base_path}
    return client.post(
        "/v1/tables",
        json={**body, "storage_options": options},
        params={"pending": True},
        **kw,
    )


def test_an_admin_sets_options_and_only_their_names_come_back(
    client: TestClient, options: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    created = add(client, options)
    assert created.status_code == 201, created.text
    table_id = created.json()["id"]
    assert created.json()["storage_options"] == ["endpoint_url", "key", "secret"]
    shown = client.get(f"/v1/tables/{table_id}")
    listed = client.get("/v1/tables")
    assert shown.json()["storage_options"] == ["endpoint_url", "key", "secret"]
    for response in (created, shown, listed):
        assert SECRET not in response.text and ACCESS_KEY not in response.text
    assert SECRET not in caplog.text


def test_patch_replaces_the_options_and_an_empty_object_removes_them(
    client: TestClient, options: dict[str, Any]
) -> None:
    table_id = add(client, options).json()["id"]
    patched = client.patch(f"/v1/tables/{table_id}", json={"storage_options": {"profile": "etl"}})
    assert patched.status_code == 200, patched.text
    assert patched.json()["storage_options"] == ["profile"]
    cleared = client.patch(f"/v1/tables/{table_id}", json={"storage_options": {}})
    assert cleared.json()["storage_options"] == []


def test_a_writer_may_register_but_not_set_storage_options(
    make_client: MakeClient, options: dict[str, Any]
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    refused = add(client, options, headers=bearer(WRITER))
    assert refused.status_code == 403
    assert refused.json()["error"]["message"].startswith("body.storage_options")
    assert add(client, None, headers=bearer(WRITER)).status_code == 201
    assert add(client, options, headers=bearer(ADMIN)).status_code == 200


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"secret": {"nested": SECRET}}, "secret: values must be strings, numbers or booleans"),
        ({"secret": [SECRET]}, "secret: values must be strings, numbers or booleans"),
        ({"secret": SECRET + "\x00"}, "secret: not valid text"),
        ({"secret": SECRET * 200}, "secret: at most 4096 characters"),
        ({"bad name": SECRET}, "option names are identifiers"),
        ({f"o{n}": SECRET for n in range(33)}, "at most 32 options"),
        ([SECRET], "expected a JSON object"),
        ({"client_kwargs": SECRET}, "client_kwargs: not a storage option of s3:// tables"),
    ],
)
def test_bad_options_are_refused_naming_the_field_never_the_value(
    client: TestClient, options: Any, says: str
) -> None:
    response = add(client, options)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "body.storage_options"
    assert says in error["message"]
    assert SECRET not in response.text


def test_tables_on_local_disk_take_no_options(client: TestClient) -> None:
    response = add(client, {"key": "k"}, base_path="/data/trips")
    assert response.status_code == 422
    assert "file:// tables take no storage options" in response.json()["error"]["message"]
    table_id = add(client, None, base_path="/data/trips").json()["id"]
    patched = client.patch(f"/v1/tables/{table_id}", json={"storage_options": {"key": "k"}})
    assert patched.status_code == 422
    assert patched.json()["error"]["field"] == "body.storage_options"


def test_the_cli_sets_options_from_a_file_and_shows_only_their_names(
    s3: S3Endpoint, options: dict[str, Any], db_url: str, tmp_path: Path
) -> None:
    base = s3.base_path("cli")
    written_table(base, table_version=6)
    secrets = tmp_path / "options.json"
    secrets.write_text(json.dumps(options))
    with start(db_url, tmp_path / "service") as service:
        cli = cli_for(service.url)
        added = cli(
            "tables", "add", base, "--name", "lake.trips", "--storage-options", str(secrets)
        )
        assert added.exit_code == 0, added.output
        replaced = cli("tables", "storage-options", "lake.trips", "-", stdin='{"profile": "etl"}')
        assert replaced.exit_code == 0, replaced.output
        assert "storage options: profile" in replaced.output
        shown = cli("tables", "ls", "--json")
        bad = cli("tables", "storage-options", "lake.trips", "-", stdin='{"anon": true}')
    assert SECRET not in added.output + replaced.output + shown.output
    assert bad.exit_code == 1
    assert "anon: not a storage option of s3:// tables" in bad.output


def test_a_callback_without_its_action_reads_the_timeline_with_the_tables_options(
    client: TestClient, s3: S3Endpoint, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer's callback that names neither its action nor write stats: the service reads
    the action off the table's timeline, on S3 with the options an admin set, not with any
    credentials of its own."""
    import s3fs

    base = s3.base_path("callback")
    written_table(base, table_version=9)
    assert add(client, options, base_path=base).status_code == 201
    latest = HudiTable.open(base, options).timeline().completed()[-1]
    for name in s3.environment:
        monkeypatch.delenv(name, raising=False)
    s3fs.S3FileSystem.clear_instance_cache()
    answer = client.post(
        "/v1/hoodie/service/commit",
        json={"basePath": base, "tableName": "trips", "commitTime": latest.requested_time},
        headers={"HUDI-CALLBACK-KEY": CALLBACK_KEY},
    )
    assert answer.status_code == 200, answer.text
    assert (answer.json()["action"], answer.json()["action_source"]) == ("deltacommit", "timeline")
