"""`GET /v1/tables/{id}/archival` against a table on disk: the dry run of an archival for a
viewer (nothing written), keep.min and keep.max from the query, else the table policy's, else
Hudi's; refusals name the field."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, MakeClient, batch, bearer, mor_writer
from tests.api.helpers import register
from tms.hudi.table import HudiTable

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def registered(client: TestClient, tmp_path: Path, policy: dict[str, int] | None = None) -> int:
    """A merge-on-read table of seven delta commits, registered."""
    writer = mor_writer(tmp_path, rows=10)
    for ts in range(2, 8):
        writer.upsert(batch(range(0, 10, 3), ts=ts))
    body: dict[str, object] = {
        "db_name": "lake",
        "table_name": "trips",
        "base_path": writer.table.base_path,
    }
    if policy:
        body["policy"] = policy
    made = client.post("/v1/tables", json=body, headers=bearer(ADMIN))
    assert made.status_code == 201, made.text
    table_id: int = made.json()["id"]
    return table_id


def test_the_dry_run_says_what_would_be_archived_and_writes_nothing(
    make_client: MakeClient, tmp_path: Path
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    table_id = registered(client, tmp_path)
    base = str(tmp_path / "trips")
    commits = [i.requested_time for i in HudiTable.open(base).timeline().commits()]
    url = f"/v1/tables/{table_id}/archival"

    default = client.get(url, headers=bearer(VIEWER))
    assert default.status_code == 200, default.text
    plan = default.json()
    assert plan["table_id"] == table_id and plan["due"] is False
    assert (plan["keep_min"], plan["keep_max"]) == (20, 30)  # Hudi's defaults
    assert plan["stopped_by"] == "keep_max" and "7 completed commits" in plan["reason"]
    assert plan["instants"] == [] and plan["earliest_kept"] == commits[0]

    due = client.get(url, params={"keep_min": 1, "keep_max": 2}, headers=bearer(VIEWER)).json()
    assert due["due"] is True and due["commits_archived"] == 2
    assert [i["instant"] for i in due["instants"]] == commits[:2]
    assert {i["action"] for i in due["instants"]} == {"deltacommit"}
    # merge-on-read keeps the last 5 delta commits its compaction trigger counts
    assert due["stopped_by"] == "compaction" and due["earliest_kept"] == commits[2]
    assert [limit["rule"] for limit in due["limits"]] == ["compaction"]
    assert [i.requested_time for i in HudiTable.open(base).timeline().commits()] == commits


def test_keep_comes_from_the_table_policy_unless_the_request_sets_it(
    make_client: MakeClient, tmp_path: Path
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    policy = {"archival_keep_min": 1, "archival_keep_max": 2}
    table_id = registered(client, tmp_path, policy)
    url = f"/v1/tables/{table_id}/archival"
    plan = client.get(url, headers=bearer(VIEWER)).json()
    assert (plan["configured_keep_min"], plan["configured_keep_max"]) == (1, 2)
    assert plan["due"] is True
    plan = client.get(url, params={"keep_max": 9}, headers=bearer(VIEWER)).json()
    assert (plan["configured_keep_min"], plan["configured_keep_max"]) == (1, 9)
    assert plan["due"] is False


def test_refusals_name_the_field(make_client: MakeClient, tmp_path: Path) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    table_id = registered(client, tmp_path)
    url = f"/v1/tables/{table_id}/archival"
    assert client.get(url).status_code == 401

    zero = client.get(url, params={"keep_min": 0}, headers=bearer(VIEWER))
    assert zero.status_code == 422 and zero.json()["error"]["field"] == "query.keep_min"
    word = client.get(url, params={"keep_max": "many"}, headers=bearer(VIEWER))
    assert word.status_code == 422 and word.json()["error"]["field"] == "query.keep_max"
    order = client.get(url, params={"keep_min": 5, "keep_max": 5}, headers=bearer(VIEWER))
    assert order.status_code == 422 and order.json()["error"]["field"] == "query.keep_max"
    # keep_max alone, not above the default keep.min (Hudi's 20)
    below = client.get(url, params={"keep_max": 3}, headers=bearer(VIEWER))
    assert below.status_code == 422, below.text
    error = below.json()["error"]
    assert error["field"] == "query.keep_max" and "hoodie.keep.min.commits" in error["message"]

    assert client.get("/v1/tables/987654/archival", headers=bearer(VIEWER)).status_code == 404

    # an archival operation with such a pair is refused when submitted, naming the key
    submit = "/v1/hoodie/service/archival/submit"
    body = {
        "db_name": "lake",
        "table_name": "trips",
        "extra_params": {"keep_min": 5, "keep_max": 5},
    }
    refused = client.post(submit, json=body, headers=bearer(ADMIN))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == "body.extra_params.keep_max"


def test_a_table_not_on_storage_is_404(client: TestClient) -> None:
    table = register(client, "ghost")
    response = client.get(f"/v1/tables/{table['id']}/archival")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_on_storage"
