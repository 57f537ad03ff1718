"""`/v1/tables/{id}/savepoints` against a table on disk: made by a writer (201, then 200 for
the same instant), listed by a viewer, removed by an admin; refusals name the field or the
reason, and each role is checked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tests.api.conftest import (
    ADMIN,
    AUTH_TOKENS,
    VIEWER,
    WRITER,
    MakeClient,
    batch,
    bearer,
    mor_writer,
)
from tests.api.helpers import register
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def registered(client: TestClient, tmp_path: Path) -> tuple[int, str, list[str]]:
    writer = mor_writer(tmp_path, rows=20)
    writer.upsert(batch(range(0, 20, 2), ts=2))
    base = writer.table.base_path
    table = client.post(
        "/v1/tables",
        json={"db_name": "lake", "table_name": "trips", "base_path": base},
        headers=bearer(ADMIN),
    ).json()
    commits = [
        i.requested_time for i in HudiTable.open(base).timeline().completed(WRITE_COMMIT_ACTIONS)
    ]
    return table["id"], base, commits


def test_a_savepoint_is_made_listed_and_removed(make_client: MakeClient, tmp_path: Path) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    table_id, base, commits = registered(client, tmp_path)
    url = f"/v1/tables/{table_id}/savepoints"
    assert client.get(url, headers=bearer(VIEWER)).json() == {"table_id": table_id, "items": []}

    body = {"instant": commits[0], "user": "ops", "comment": "before the backfill"}
    made = client.post(url, json=body, headers=bearer(WRITER))
    assert made.status_code == 201, made.text
    written = made.json()
    assert written["created"] is True
    savepoint = written["savepoint"]
    assert savepoint["instant"] == commits[0] and savepoint["files"] > 0
    assert (savepoint["savepointed_by"], savepoint["comment"]) == ("ops", "before the backfill")
    on_disk = HudiTable.open(base).timeline().completed((Action.SAVEPOINT,))
    assert [i.requested_time for i in on_disk] == [commits[0]]

    again = client.post(url, json={"instant": commits[0]}, headers=bearer(WRITER))
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["savepoint"] == savepoint  # a repeat changes nothing

    listed = client.get(url, headers=bearer(VIEWER)).json()["items"]
    assert listed == [savepoint]

    assert client.delete(f"{url}/{commits[0]}", headers=bearer(WRITER)).status_code == 403
    assert client.delete(f"{url}/{commits[0]}", headers=bearer(ADMIN)).status_code == 204
    assert HudiTable.open(base).timeline().completed((Action.SAVEPOINT,)) == []
    gone = client.delete(f"{url}/{commits[0]}", headers=bearer(ADMIN))
    assert gone.status_code == 404
    assert gone.json()["error"]["message"] == f"table {table_id} has no savepoint at {commits[0]}"


def test_refusals_name_the_field_or_the_reason(make_client: MakeClient, tmp_path: Path) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    table_id, _, commits = registered(client, tmp_path)
    url = f"/v1/tables/{table_id}/savepoints"

    assert client.post(url, json={"instant": commits[0]}, headers=bearer(VIEWER)).status_code == 403
    bad = client.post(url, json={"instant": "yesterday"}, headers=bearer(WRITER))
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "body.instant"
    unknown = client.post(url, json={"instant": commits[0], "when": 1}, headers=bearer(WRITER))
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "body.when"
    missing = client.post(url, json={}, headers=bearer(WRITER))
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "body.instant"

    absent = client.post(url, json={"instant": "20200101000000000"}, headers=bearer(WRITER))
    assert absent.status_code == 409, absent.text
    error = absent.json()["error"]
    assert error["code"] == "savepoint_refused"
    assert "not a completed commit" in error["message"]
    assert client.get(url, headers=bearer(VIEWER)).json()["items"] == []

    assert client.get("/v1/tables/987654/savepoints", headers=bearer(VIEWER)).status_code == 404
    bad_path = client.delete(f"{url}/not-an-instant", headers=bearer(ADMIN))
    assert bad_path.status_code == 422


def test_a_table_not_on_storage_is_404(client: TestClient) -> None:
    table = register(client, "ghost")
    response = client.post(
        f"/v1/tables/{table['id']}/savepoints", json={"instant": "20240101000000000"}
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_on_storage"
