"""What the operator console reads: `/v1/overview` (queues, attempts finished per bucket,
instances), `/v1/overview/tables` (backlog, search, sort, failures in 24 h),
`/v1/overview/actions` (the table services, as the registry lists them), a table's file
groups from storage (checked against hudi-rs), an attempt's log, and the queue filter of
`/v1/operations`. Viewers may read all of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from tests import oracle
from tests.api.conftest import ADMIN, AUTH_TOKENS, VIEWER, MakeClient, batch, bearer, mor_writer
from tests.api.helpers import register, submit
from tms.hudi.actions import TABLE_SERVICE_ACTIONS
from tms.services.registry import SERVICES
from tms.store import Attempt, register_instance

if TYPE_CHECKING:
    from starlette.testclient import TestClient

WORKER = {
    "id": "overview-worker",
    "host": "host",
    "pid": 1,
    "spark_master": "local[1]",
    "queues": ["default", "etl"],
    "slots": 4,
}


def _run(
    client: TestClient, outcome: str, log_dir: str | None = None, **submitted: Any
) -> dict[str, Any]:
    """Submit an operation, claim it as a worker and report `outcome` (None: leave it
    RUNNING); the claimed attempt."""
    submit(client, max_retries=0, execution_engine="spark-worker", **submitted).raise_for_status()
    claimed = client.post(
        f"/v1/workers/{WORKER['id']}/claim",
        json={"free": 1, "wait_seconds": 0, "log_dir": log_dir},
    ).json()["attempts"]
    assert len(claimed) == 1, claimed
    attempt: dict[str, Any] = claimed[0]
    if outcome != "RUNNING":
        result = client.post(
            f"/v1/jobs/attempts/{attempt['attempt_id']}/result",
            json={"outcome": outcome, "error": "boom" if outcome == "FAILED" else None},
            headers=bearer(attempt["token"]),
        )
        assert result.status_code == 200, result.text
    return attempt


@pytest.fixture
def busy(client: TestClient) -> dict[str, Any]:
    """Three tables: trips with a failed and a succeeded compaction and a running clean,
    rides (queue etl) with a scheduled compaction, empty untouched."""
    client.post("/v1/workers", json=WORKER).raise_for_status()
    trips = register(client, "trips")
    rides = register(client, "rides", queue="etl")
    register(client, "empty")
    failed = _run(client, "FAILED")
    succeeded = _run(client, "SUCCEEDED")
    running = _run(client, "RUNNING", service="clean")
    submit(client, table_name="rides").raise_for_status()
    return {
        "trips": trips["id"],
        "rides": rides["id"],
        "failed": failed,
        "succeeded": succeeded,
        "running": running,
    }


def test_overview_counts_queues_attempts_and_instances(
    client: TestClient, busy: dict[str, Any], session: Session
) -> None:
    register_instance(session, "inst-a", host="h", pid=7)
    session.commit()
    overview = client.get("/v1/overview").json()
    assert overview["queues"] == [
        {"queue": "default", "running": 1, "queued": 0},
        {"queue": "etl", "running": 0, "queued": 1},
    ]
    hour, day = overview["last_hour"], overview["last_day"]
    assert (hour["bucket_seconds"], len(hour["starts"])) == (300, 12)
    assert (day["bucket_seconds"], len(day["starts"])) == (3600, 24)
    for span in (hour, day):
        assert (sum(span["succeeded"]), sum(span["failed"]), sum(span["cancelled"])) == (1, 1, 0)
        assert span["failure_rate"] == 0.5
        # The newest bucket holds what just finished (the one before, if a bucket began
        # between the finish and the request).
        assert span["succeeded"][-2:] in ([0, 1], [1, 0])
    (instance,) = overview["instances"]
    assert (instance["id"], instance["alive"]) == ("inst-a", True)


def test_attempts_are_counted_in_the_bucket_they_finished_in(
    client: TestClient, busy: dict[str, Any], session: Session
) -> None:
    """An attempt that finished 2 h ago is in the day's chart, 3 buckets from the end (or 2
    when the hour just turned), not in the hour's; one of 2 days ago in neither."""
    now = datetime.now(UTC)
    for attempt, age in (
        (busy["failed"], timedelta(hours=2)),
        (busy["succeeded"], timedelta(days=2)),
    ):
        session.execute(
            update(Attempt).where(Attempt.id == attempt["attempt_id"]).values(finished_at=now - age)
        )
    session.commit()
    overview = client.get("/v1/overview").json()
    assert sum(overview["last_hour"]["failed"]) == sum(overview["last_hour"]["succeeded"]) == 0
    assert overview["last_hour"]["failure_rate"] is None
    day = overview["last_day"]
    assert sum(day["succeeded"]) == 0 and sum(day["failed"]) == 1
    assert day["failed"].index(1) in (20, 21)
    starts = [datetime.fromisoformat(s) for s in day["starts"]]
    assert all(b - a == timedelta(hours=1) for a, b in pairwise(starts))
    assert starts[-1] <= now < starts[-1] + timedelta(hours=1)


def test_tables_are_searched_and_sorted_by_backlog_and_failures(
    client: TestClient, busy: dict[str, Any], session: Session
) -> None:
    from tms.store import Tbl

    session.execute(
        update(Tbl).where(Tbl.id == busy["rides"]).values(delta_commits_since_compaction=9)
    )
    session.execute(update(Tbl).where(Tbl.id == busy["trips"]).values(commits_since_clean=4))
    session.commit()

    def names(**params: Any) -> list[str]:
        page = client.get("/v1/overview/tables", params=params)
        assert page.status_code == 200, page.text
        return [i["table_name"] for i in page.json()["items"]]

    assert names() == ["empty", "rides", "trips"]
    # Ties in table id order (trips was registered before empty).
    assert names(sort="delta_commits_since_compaction", order="desc") == ["rides", "trips", "empty"]
    assert names(sort="delta_commits_since_compaction") == ["trips", "empty", "rides"]
    assert names(sort="commits_since_clean", order="desc")[0] == "trips"
    assert names(sort="failures_24h", order="desc")[0] == "trips"
    assert names(search="RIDE") == ["rides"]
    assert names(search="/data/lake/t") == ["trips"]
    assert names(search="%") == [], "LIKE wildcards are searched as text"
    page = client.get("/v1/overview/tables", params={"limit": 1, "offset": 1}).json()
    assert (page["total"], [i["table_name"] for i in page["items"]]) == (3, ["rides"])
    trips = next(
        i for i in client.get("/v1/overview/tables").json()["items"] if i["table_name"] == "trips"
    )
    assert (trips["failures_24h"], trips["running"], trips["scheduled"]) == (1, 1, 0)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"sort": "size"}, "query.sort"),
        ({"order": "up"}, "query.order"),
        ({"limit": 0}, "query.limit"),
        ({"search": "x" * 201}, "query.search"),
        ({"offset": -1}, "query.offset"),
    ],
)
def test_bad_table_list_parameters_are_422_naming_them(
    client: TestClient, params: dict[str, Any], field: str
) -> None:
    response = client.get("/v1/overview/tables", params=params)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field


def test_viewers_read_the_overview_and_tables(make_client: MakeClient) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    for path in ("/v1/overview", "/v1/overview/tables", "/v1/overview/actions"):
        assert client.get(path, headers=bearer(VIEWER)).status_code == 200
        assert client.get(path).status_code == 401


def test_the_actions_are_the_registrys_table_services(client: TestClient) -> None:
    """The console's action filter offers what this answers: the registry's services."""
    answer = client.get("/v1/overview/actions")
    assert answer.status_code == 200
    assert answer.json() == {"actions": list(TABLE_SERVICE_ACTIONS)}
    assert answer.json()["actions"] == list(SERVICES)
    document = client.get("/openapi.json").json()
    schema = document["paths"]["/v1/overview/actions"]["get"]["responses"]["200"]["content"]
    assert schema["application/json"]["schema"] == {"$ref": "#/components/schemas/ActionsOut"}


def test_the_operations_list_filters_by_queue(client: TestClient, busy: dict[str, Any]) -> None:
    etl = client.get("/v1/operations", params={"queue": "etl"}).json()["items"]
    assert [o["table_name"] for o in etl] == ["rides"]
    default = client.get("/v1/operations", params={"queue": "default"}).json()["items"]
    assert {o["table_name"] for o in default} == {"trips"} and len(default) == 3
    assert client.get("/v1/operations", params={"queue": "nope"}).json()["items"] == []


def test_file_groups_are_what_storage_shows(make_client: MakeClient, tmp_path: Path) -> None:
    client = make_client(auth_tokens=AUTH_TOKENS)
    writer = mor_writer(tmp_path, rows=40)
    writer.upsert(batch(range(0, 40, 2), ts=2))
    writer.upsert(batch(range(0, 40, 4), ts=3))
    base = writer.table.base_path
    table = client.post(
        "/v1/tables",
        json={"db_name": "lake", "table_name": "trips", "base_path": base},
        headers=bearer(ADMIN),
    ).json()
    answer = client.get(f"/v1/tables/{table['id']}/file-groups", headers=bearer(VIEWER))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    expected = oracle.file_slices(base)
    got = [
        {
            "partition": g["partition"],
            "file_id": g["file_id"],
            "base_instant": g["base_instant"],
            "base_file": g["base_file"],
            "log_files": g["log_files"],
        }
        for g in body["items"]
    ]
    assert got == [{**s, "log_files": len(s["log_files"])} for s in expected]
    assert body["file_groups"] == len(expected) and body["truncated"] is False
    assert body["log_files"] == sum(len(s["log_files"]) for s in expected) == 2
    on_disk = sum(p.stat().st_size for p in Path(base).rglob("*") if _data_file(p))
    assert body["total_size"] == on_disk
    first = client.get(
        f"/v1/tables/{table['id']}/file-groups", params={"limit": 1}, headers=bearer(VIEWER)
    ).json()
    assert len(first["items"]) == 1 and first["truncated"] is (len(expected) > 1)


def _data_file(path: Path) -> bool:
    return path.is_file() and ".hoodie" not in path.parts and ".hoodie_partition" not in path.name


def test_file_groups_of_a_table_not_on_storage_are_404(client: TestClient) -> None:
    table = register(client, "ghost")
    response = client.get(f"/v1/tables/{table['id']}/file-groups")
    assert response.status_code == 404
    assert response.json()["error"] == {
        "code": "not_on_storage",
        "message": "no Hudi table on storage at /data/lake/ghost",
        "field": None,
    }
    assert client.get("/v1/tables/987654/file-groups").status_code == 404


def test_an_attempts_log_is_read_from_the_log_dir_only(
    make_client: MakeClient, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    client = make_client(log_dir=logs)
    client.post("/v1/workers", json=WORKER).raise_for_status()
    register(client, "trips")
    attempt = _run(client, "FAILED", log_dir=str(logs / "worker"))
    op, number = attempt["operation_id"], attempt["attempt_id"]
    path = logs / "worker" / str(op) / f"{number}.log"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"line 1\nline 2 \xff\n")
    url = f"/v1/operations/{op}/attempts/{number}/log"
    whole = client.get(url)
    assert whole.status_code == 200
    assert whole.headers["content-type"] == "text/plain; charset=utf-8"
    assert whole.text == "line 1\nline 2 \ufffd\n"
    assert whole.headers["x-log-truncated"] == "false"
    end = client.get(url, params={"bytes": 7})
    assert (end.content, end.headers["x-log-truncated"]) == (b"ne 2 \xef\xbf\xbd\n", "true")
    assert client.get(f"/v1/operations/{op}/attempts/{number + 1}/log").status_code == 404
    unknown = client.get(f"/v1/operations/{op + 1}/attempts/{number}/log")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == f"operation {op + 1} not found"
    assert client.get(url, params={"bytes": 0}).status_code == 422


def test_a_log_outside_the_log_dir_is_never_read(make_client: MakeClient, tmp_path: Path) -> None:
    """`log_path` comes from the database (a worker names its own log dir): a file outside
    this instance's log dir, directly or through a link, is 404 and never opened."""
    logs = tmp_path / "logs"
    logs.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t")
    client = make_client(log_dir=logs)
    client.post("/v1/workers", json=WORKER).raise_for_status()
    register(client, "trips")
    outside = _run(client, "FAILED", log_dir=str(tmp_path))
    (tmp_path / str(outside["operation_id"])).mkdir()
    (tmp_path / str(outside["operation_id"]) / f"{outside['attempt_id']}.log").write_text("s3cr3t")
    register(client, "rides")
    linked = _run(client, "FAILED", log_dir=str(logs / ".." / "logs"), table_name="rides")
    link = logs / str(linked["operation_id"]) / f"{linked['attempt_id']}.log"
    link.parent.mkdir()
    link.symlink_to(secret)
    for attempt in (outside, linked):
        url = f"/v1/operations/{attempt['operation_id']}/attempts/{attempt['attempt_id']}/log"
        response = client.get(url)
        assert response.status_code == 404, response.text
        assert "s3cr3t" not in response.text
        assert "not on this instance" in response.json()["error"]["message"]
    # an attempt is read under its own operation only
    other = f"/v1/operations/{linked['operation_id']}/attempts/{outside['attempt_id']}/log"
    response = client.get(other)
    assert response.status_code == 404
    assert response.json()["error"]["message"] == (
        f"operation {linked['operation_id']} has no attempt {outside['attempt_id']}"
    )
