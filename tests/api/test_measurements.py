"""`GET /v1/tables/{id}/measurements` and the per-table gauges of `/metrics`: what the
measurement sweep took of a real merge-on-read table, for a viewer; unknown tables 404,
bad query values 422 naming the parameter."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, MakeClient, bearer
from tests.measure.test_layout import files_on_disk, mor_table
from tests.scheduler.test_measure import Clock, measure_settings
from tms.scheduler.measure import MeasureSweep
from tms.store import Tbl, session_scope

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def registered(client: TestClient, base: str, name: str = "trips") -> int:
    body = {"db_name": "lake", "table_name": name, "base_path": base}
    made = client.post("/v1/tables", json=body, headers=bearer(ADMIN))
    assert made.status_code == 201, made.text
    table_id: int = made.json()["id"]
    return table_id


def measured(
    make_client: MakeClient, factory: sessionmaker[Session], tmp_path: Path
) -> tuple[TestClient, int]:
    """A client, and a table measured twice: once paused (skipped), then measured."""
    client = make_client(auth_tokens=AUTH_TOKENS)
    base, _ = mor_table(tmp_path)
    table_id = registered(client, base)
    sweep = MeasureSweep(factory, measure_settings(measure_interval_seconds=1), "i1", clock=Clock())
    with session_scope(factory) as session:
        session.execute(update(Tbl).values(paused=True))
    assert sweep.run().skipped == [table_id]
    with session_scope(factory) as session:
        session.execute(update(Tbl).values(paused=False, last_measured_at=None))
    sweep.pacer.lapse(0)
    assert MeasureSweep(factory, measure_settings(), "i2", clock=Clock()).run().measured == [
        table_id
    ]
    return client, table_id


def test_a_viewer_reads_the_latest_measurement_and_the_history(
    make_client: MakeClient, factory: sessionmaker[Session], tmp_path: Path
) -> None:
    client, table_id = measured(make_client, factory, tmp_path)
    url = f"/v1/tables/{table_id}/measurements"
    answer = client.get(url, headers=bearer(VIEWER))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["table_id"] == table_id
    latest = body["latest"]
    assert latest["status"] == "measured" and latest["reason"] is None
    layout = latest["layout"]
    assert (layout["partitions"], layout["file_slices"], layout["slices_with_log_files"]) == (
        3,
        6,
        2,
    )
    assert layout["log_files_per_slice"]["max"] == 2 and layout["small_files"] == 6
    assert layout["read_amplification"]["log_files"] == 3
    assert [w["partition"] for w in layout["worst_partitions"]] == ["la", "nyc", "sf"]
    writes = latest["writes"]
    assert writes["commits"] == 0 and writes["commits_per_hour"] == 0  # nothing notified
    assert latest["services"] == {}
    assert [i["status"] for i in body["items"]] == ["measured", "skipped"]
    assert body["items"][1]["reason"].startswith("paused")
    assert body["items"][1]["layout"] is None

    only = client.get(url, params={"status": "skipped", "limit": 1}, headers=bearer(VIEWER))
    assert [i["status"] for i in only.json()["items"]] == ["skipped"]
    since = body["items"][0]["measured_at"]
    newer = client.get(url, params={"since": since}, headers=bearer(VIEWER)).json()
    assert [i["status"] for i in newer["items"]] == ["measured"]
    future = client.get(url, params={"since": "2999-01-01T00:00:00Z"}, headers=bearer(VIEWER))
    assert future.json()["items"] == [] and future.json()["latest"] == latest


def test_a_table_not_measured_yet_has_no_latest(make_client: MakeClient, tmp_path: Path) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    base, _ = mor_table(tmp_path)
    table_id = registered(client, base)
    answer = client.get(f"/v1/tables/{table_id}/measurements", headers=bearer(VIEWER))
    assert answer.status_code == 200
    assert answer.json() == {"table_id": table_id, "latest": None, "items": []}


def test_unknown_tables_are_404_and_callers_without_a_token_401(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    missing = client.get("/v1/tables/999/measurements", headers=bearer(VIEWER))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert client.get("/v1/tables/999/measurements").status_code == 401


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "query.limit"),
        ({"limit": 1001}, "query.limit"),
        ({"limit": "ten"}, "query.limit"),
        ({"since": "yesterday"}, "query.since"),
        ({"since": "2026-12-07T10:00:00"}, "query.since"),  # no offset: which clock?
        ({"status": "pending"}, "query.status"),
    ],
)
def test_bad_query_values_are_refused_naming_the_parameter(
    make_client: MakeClient, tmp_path: Path, params: dict[str, object], field: str
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    table_id = registered(client, mor_table(tmp_path)[0])
    refused = client.get(
        f"/v1/tables/{table_id}/measurements", params=params, headers=bearer(VIEWER)
    )
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "validation_error" and error["field"] == field


def test_metrics_show_each_tables_latest_measurement(
    make_client: MakeClient, factory: sessionmaker[Session], tmp_path: Path
) -> None:
    client, table_id = measured(make_client, factory, tmp_path)
    text = client.get("/metrics").text
    lines = set(text.splitlines())
    for line in (
        'tms_table_file_slices{table="lake.trips"} 6.0',
        'tms_table_small_files{table="lake.trips"} 6.0',
        'tms_table_read_log_files{table="lake.trips"} 3.0',
        'tms_table_log_files_per_slice{stat="max",table="lake.trips"} 2.0',
        'tms_table_log_files_per_slice{stat="p50",table="lake.trips"} 0.0',
        'tms_table_commits_per_hour{table="lake.trips"} 0.0',
    ):
        assert line in lines, line
    assert any(
        line.startswith('tms_table_base_file_bytes{stat="p50",table="lake.trips"}')
        for line in lines
    )
    assert any(
        line.startswith('tms_table_measured_timestamp_seconds{table="lake.trips"}')
        for line in lines
    )
    assert 'tms_measurements_total{result="measured"}' in text
    listed = 'tms_storage_requests_total{action="measure",kind="LIST",table="lake.trips"}'
    assert any(line.startswith(listed) for line in lines)  # what measuring cost

    # A removed table loses its series at the next refresh.
    assert client.delete(f"/v1/tables/{table_id}", headers=bearer(ADMIN)).status_code == 204
    client.app.state.measurement_gauges_at = None  # type: ignore[attr-defined]
    after = client.get("/metrics").text.splitlines()
    assert not [line for line in after if line.startswith("tms_table_")]


def test_the_policys_small_file_limit_is_set_through_the_api_and_measured_with(
    make_client: MakeClient, factory: sessionmaker[Session], tmp_path: Path
) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    base = mor_table(tmp_path)[0]
    table_id = registered(client, base)
    bases = sorted(files_on_disk(base)[0])
    url = f"/v1/tables/{table_id}"
    refused = client.patch(url, json={"policy": {"small_file_limit": 0}}, headers=bearer(ADMIN))
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "body.policy.small_file_limit"
    policy = {"small_file_limit": bases[3]}
    assert client.patch(url, json={"policy": policy}, headers=bearer(ADMIN)).status_code == 200
    assert MeasureSweep(factory, measure_settings(), "i1", clock=Clock()).run().measured
    latest = client.get(f"{url}/measurements", headers=bearer(VIEWER)).json()["latest"]
    layout = latest["layout"]
    assert (layout["small_file_limit"], layout["small_file_limit_source"]) == (bases[3], "policy")
    assert layout["small_files"] == sum(1 for size in bases if size < bases[3])
    assert layout["small_file_bytes"] == sum(size for size in bases if size < bases[3])
