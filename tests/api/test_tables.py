"""Operator resource /v1/tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from tests.api.helpers import register
from tests.store.helpers import claim
from tms.testing.sample_writer.writer import HudiWriter

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def test_create_get_and_list_with_cursor(client: TestClient) -> None:
    created = client.post(
        "/v1/tables",
        json={"db_name": "lake", "table_name": "t0", "base_path": "/data/t0", "queue": "etl"},
        params={"pending": True},
    )
    assert created.status_code == 201
    for n in range(1, 5):
        register(client, f"t{n}")
    table_id = created.json()["id"]
    assert client.get(f"/v1/tables/{table_id}").json()["queue"] == "etl"
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/tables", params=params).json()
        seen += [t["table_name"] for t in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["t0", "t1", "t2", "t3", "t4"]
    assert client.get("/v1/tables", params={"paused": True}).json()["items"] == []
    assert len(client.get("/v1/tables", params={"db_name": "lake"}).json()["items"]) == 5
    assert client.get("/v1/tables", params={"db_name": "other"}).json()["items"] == []


def test_post_tables_refuses_unknown_fields(client: TestClient) -> None:
    response = client.post(
        "/v1/tables",
        json={"db_name": "lake", "table_name": "t", "base_path": "/d", "paused_": True},
        params={"pending": True},
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "body.paused_"


def test_patch_pause_resume_policy_and_actions(client: TestClient) -> None:
    table_id = register(client)["id"]
    patched = client.patch(
        f"/v1/tables/{table_id}",
        json={
            "paused": True,
            "priority": 7,
            "policy": {
                "clean_commits": 3,
                "clustering_commits": 4,
                "metadata_compaction_delta_commits": 20,
                "log_compaction_delta_commits": 6,
            },
            "enabled_actions": ["compaction", "clustering", "CLEAN", "clustering"],
        },
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert (body["paused"], body["priority"]) == (True, 7)
    assert body["policy"] == {
        "clean_commits": 3,
        "clustering_commits": 4,
        "metadata_compaction_delta_commits": 20,
        "log_compaction_delta_commits": 6,
    }
    assert body["thresholds"] == {
        "compaction_delta_commits": 5,
        "clean_commits": 3,
        "clustering_commits": 4,
        "metadata_compaction_delta_commits": 20,
        "log_compaction_delta_commits": 6,
        "archival_commits": 11,
        "ttl_interval_hours": 24.0,
    }
    assert body["last_partition_ttl_at"] is None
    assert body["commits_since_metadata_compaction"] == 0
    assert body["delta_commits_since_log_compaction"] == 0
    assert body["enabled_actions"] == ["compaction", "clustering", "clean"]
    planning = {"clean_policy": "KEEP_LATEST_FILE_VERSIONS", "clean_retained": 2}
    with_params = client.patch(f"/v1/tables/{table_id}", json={"policy": planning})
    assert with_params.status_code == 200 and with_params.json()["policy"] == planning
    resumed = client.patch(f"/v1/tables/{table_id}", json={"paused": False, "policy": {}})
    assert resumed.json()["paused"] is False and resumed.json()["policy"] == {}
    for bad in (
        {"policy": {"clean_commitz": 3}},
        {"policy": {"clean_commits": -1}},
        {"policy": {"log_compaction_delta_commits": -1}},
        {"policy": {"log_compaction_delta_commits": 1_000_001}},
        {"policy": {"log_compaction_delta_commits": "5"}},
        {"policy": {"log_compaction_delta_commits": True}},
        {"policy": {"log_compaction_delta_commits": 2.5}},
        {"policy": {"clean_policy": "KEEP_EVERYTHING"}},
        {"policy": {"clean_retained": 0}},
        {"policy": {"compaction_strategy": "biggest"}},
        {"enabled_actions": ["vacuum"]},
        {"paused": None},
        {"priority": 10**30},
    ):
        response = client.patch(f"/v1/tables/{table_id}", json=bad)
        assert response.status_code == 422, (bad, response.text)
    assert client.patch("/v1/tables/999999", json={"paused": True}).status_code == 404


def test_delete_table_and_busy_table(client: TestClient, session: Session) -> None:
    table_id = register(client)["id"]
    client.post(
        "/v1/hoodie/service/clean/submit", json={"db_name": "lake", "table_name": "trips"}
    ).raise_for_status()
    claim(session)
    session.commit()
    busy = client.delete(f"/v1/tables/{table_id}")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "table_busy"
    other = register(client, "other")["id"]
    assert client.delete(f"/v1/tables/{other}").status_code == 204
    assert client.get(f"/v1/tables/{other}").status_code == 404
    assert client.delete(f"/v1/tables/{other}").status_code == 404


def test_timeline_is_read_from_storage(client: TestClient, mor_table: HudiWriter) -> None:
    table = client.post(
        "/v1/tables",
        json={"db_name": "lake", "table_name": "trips", "base_path": mor_table.table.base_path},
    ).json()
    timeline = client.get(f"/v1/tables/{table['id']}/timeline")
    assert timeline.status_code == 200, timeline.text
    body = timeline.json()
    assert (body["table_type"], body["table_version"]) == ("MERGE_ON_READ", 6)
    assert [(i["action"], i["state"]) for i in body["instants"]] == [("deltacommit", "COMPLETED")]
    missing = register(client, "gone")["id"]
    response = client.get(f"/v1/tables/{missing}/timeline")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_on_storage"
