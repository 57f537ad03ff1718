"""Hudi's HTTP commit callback with the payload released writers send."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from tests.api.conftest import WRITER, MakeClient, TestClient, bearer, make_settings
from tests.api.helpers import callback_payload, instant, notify, register, write_stat
from tms.api import create_app
from tms.store import Commit, Operation, Tbl
from tms.testing.sample_writer.writer import HudiWriter


def _ops(session: Session) -> list[tuple[str, str | None, str]]:
    rows = session.scalars(select(Operation).order_by(Operation.id)).all()
    return [(op.action.value, op.instant, op.status.value) for op in rows]


def _counters(client: TestClient, table_id: int) -> tuple[int, int]:
    """The table's delta commits since a log compaction and since a compaction, as shown."""
    shown = client.get(f"/v1/tables/{table_id}").json()
    return shown["delta_commits_since_log_compaction"], shown["delta_commits_since_compaction"]


def test_real_payload_is_stored_once_when_sent_twice(client: TestClient, session: Session) -> None:
    payload = callback_payload(instant())
    first = notify(client, payload)
    again = notify(client, payload)
    assert first["new"] is True and again["new"] is False
    assert first["table_registered"] is True and again["table_registered"] is False
    assert (first["action"], first["action_source"]) == ("deltacommit", "write_stats")
    assert session.scalar(select(func.count()).select_from(Commit)) == 1
    commit = session.scalars(select(Commit)).one()
    assert (commit.instant, commit.action, commit.records, commit.bytes) == (
        payload["commitTime"],
        "deltacommit",
        10,
        4096,
    )
    assert (commit.files, commit.log_files) == (1, 1)
    table = session.get(Tbl, first["table_id"])
    assert table is not None
    assert (table.db_name, table.table_name, table.base_path) == (
        "default",
        "trips",
        "/data/lake/trips",
    )
    assert table.delta_commits_since_compaction == 1  # counted once, not twice


def test_five_delta_commits_make_exactly_one_compaction(
    client: TestClient, session: Session
) -> None:
    for _ in range(4):
        assert notify(client, callback_payload(instant()))["operations_created"] == []
    fifth = notify(client, callback_payload(instant()))
    assert len(fifth["operations_created"]) == 1
    assert _ops(session) == [("compaction", None, "SCHEDULED")]
    table = session.get(Tbl, fifth["table_id"])
    assert table is not None and table.delta_commits_since_compaction == 0
    # Five more: the compaction is still pending, so no second one; the tenth commit cleans.
    results = [notify(client, callback_payload(instant())) for _ in range(5)]
    assert [len(r["operations_created"]) for r in results] == [0, 0, 0, 0, 1]
    assert _ops(session) == [("compaction", None, "SCHEDULED"), ("clean", None, "SCHEDULED")]


def test_ten_commits_of_a_copy_on_write_table_make_one_clean(
    client: TestClient, session: Session
) -> None:
    register(client, table_type="COPY_ON_WRITE")
    for _ in range(10):
        payload = callback_payload(instant(), log=False)
        payload["commitActionType"] = "commit"  # newer writers send the string
        notify(client, payload)
    assert _ops(session) == [("clean", None, "SCHEDULED")]


def test_policies_respect_pause_and_table_overrides(client: TestClient, session: Session) -> None:
    table = register(client, policy={"compaction_delta_commits": 2})
    client.patch(f"/v1/tables/{table['id']}", json={"paused": True}).raise_for_status()
    for _ in range(3):
        notify(client, callback_payload(instant()))
    assert _ops(session) == []
    client.patch(f"/v1/tables/{table['id']}", json={"paused": False}).raise_for_status()
    assert len(notify(client, callback_payload(instant()))["operations_created"]) == 1


def test_action_inferred_from_the_timeline_of_a_real_table(
    client: TestClient, mor_table: HudiWriter, session: Session
) -> None:
    """An insert into a merge-on-read table writes no log file: the stats cannot tell, the
    timeline can. The table is auto-registered with type and version from storage."""
    timeline = mor_table.table.timeline()
    (first,) = timeline.commits()
    stats = [s.to_json_dict() for s in timeline.commit_metadata(first).write_stats()]
    payload = callback_payload(
        first.requested_time, base_path=mor_table.table.base_path, stats=stats
    )
    result = notify(client, payload)
    assert (result["action"], result["action_source"]) == ("deltacommit", "timeline")
    table = session.get(Tbl, result["table_id"])
    assert table is not None
    assert (table.db_name, table.table_type, table.table_version) == ("lake", "MERGE_ON_READ", 6)


def test_a_compaction_by_the_writer_restarts_the_counter(
    client: TestClient, session: Session
) -> None:
    for _ in range(3):
        result = notify(client, callback_payload(instant()))
    compacted = callback_payload(instant(), log=False)
    compacted["commitActionType"] = "compaction"
    assert notify(client, compacted)["action"] == "compaction"
    table = session.get(Tbl, result["table_id"])
    assert table is not None
    assert (table.delta_commits_since_compaction, table.commits_since_clean) == (0, 3)
    assert table.delta_commits_since_log_compaction == 0  # no log blocks left to merge


def test_delta_commits_make_a_log_compaction_of_a_table_that_enables_it(
    client: TestClient, session: Session
) -> None:
    table = register(
        client,
        table_type="MERGE_ON_READ",
        enabled_actions=["logcompaction"],
        policy={"log_compaction_delta_commits": 3},
    )
    assert table["thresholds"]["log_compaction_delta_commits"] == 3
    results = [notify(client, callback_payload(instant())) for _ in range(3)]
    assert [len(r["operations_created"]) for r in results] == [0, 0, 1]
    assert _ops(session) == [("logcompaction", None, "SCHEDULED")]
    assert _counters(client, table["id"]) == (0, 3)
    for _ in range(4):  # pending: no second one, the counter counts on
        assert notify(client, callback_payload(instant()))["operations_created"] == []
    assert _counters(client, table["id"]) == (4, 7)
    assert _ops(session) == [("logcompaction", None, "SCHEDULED")]


def test_action_falls_back_to_the_table_type(client: TestClient) -> None:
    register(client, table_type="MERGE_ON_READ")
    result = notify(client, callback_payload(instant(), log=False))
    assert (result["action"], result["action_source"]) == ("deltacommit", "table_type")


def test_unknown_table_is_404_when_auto_registration_is_off(make_client: MakeClient) -> None:
    client = make_client(auto_register=False)
    response = client.post(
        "/v1/hoodie/service/commit",
        json=callback_payload(instant()),
        headers={"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"},
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_callback_key_is_checked(make_client: MakeClient) -> None:
    client = make_client(callback_keys="k-one,k-two", auth_tokens=f"writer:{WRITER}")
    payload = callback_payload(instant())
    url = "/v1/hoodie/service/commit"
    assert client.post(url, json=payload).status_code == 401
    wrong = client.post(
        url, json=payload, headers={"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "unauthorized"
    assert client.post(url, json=payload, headers={"HUDI-CALLBACK-KEY": "k-two"}).status_code == 200
    # With auth on, a writer's bearer token is accepted instead of the key.
    assert client.post(url, json=payload, headers=bearer(WRITER)).status_code == 200


def test_bad_payloads_get_field_errors_not_500(client: TestClient) -> None:
    cases: list[tuple[Any, str]] = [
        ({**callback_payload(instant()), "commitTime": "yesterday"}, "body.commitTime"),
        (
            {k: v for k, v in callback_payload(instant()).items() if k != "basePath"},
            "body.basePath",
        ),
        ({**callback_payload(instant()), "hoodieWriteStat": "nope"}, "body.hoodieWriteStat"),
    ]
    for body, field in cases:
        response = client.post(
            "/v1/hoodie/service/commit",
            json=body,
            headers={"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"},
        )
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == field


def _concurrently(app: Any, payloads: list[dict[str, Any]]) -> list[httpx.Response]:
    async def send_all() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tms") as http:
            return list(
                await asyncio.gather(
                    *(
                        http.post(
                            "/v1/hoodie/service/commit",
                            json=payload,
                            headers={"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"},
                        )
                        for payload in payloads
                    )
                )
            )

    return asyncio.run(send_all())


def test_concurrent_callbacks_share_transactions_and_count_exactly(
    factory: sessionmaker[Session], session: Session
) -> None:
    """60 callbacks at once for three tables, one of them unknown and some repeated: each
    commit is stored and counted once, each table gets one compaction, and the
    notifications were written in fewer transactions than there were requests."""
    app = create_app(make_settings(), factory)
    with TestClient(app) as client:
        for name in ("a", "b"):
            register(client, name)
    batches_before = _metric(app, "tms_commit_batch_size_count")
    payloads = []
    for n in range(20):
        for name in ("a", "b", "new"):
            base_path = f"/data/lake/{name}"
            payloads.append(callback_payload(f"2026020100{n:07d}", base_path=base_path))
    payloads += payloads[:6]  # writers repeating themselves
    responses = _concurrently(app, payloads)
    assert [r.status_code for r in responses] == [200] * len(payloads), responses[0].text
    bodies = [r.json() for r in responses]
    assert sum(b["new"] for b in bodies) == 60
    assert sum(b["table_registered"] for b in bodies) == 1
    assert session.scalar(select(func.count()).select_from(Commit)) == 60
    for table in session.scalars(select(Tbl)):
        # The counter restarted when the table's compaction was created (with the batch that
        # crossed the threshold); it counts the commits stored by later transactions, which
        # the store's commit order tells (not the transactions' start times).
        compaction = session.scalars(
            select(Operation).where(Operation.tbl_id == table.id, Operation.action == "compaction")
        ).one()
        later = select(func.count()).where(
            Commit.tbl_id == table.id, Commit.seq > compaction.commit_seq
        )
        assert table.delta_commits_since_compaction == session.scalar(later), table.table_name
    assert sorted(a for a, _, _ in _ops(session)) == ["clean"] * 3 + ["compaction"] * 3
    reported = [op for b in bodies for op in b["operations_created"]]
    assert sorted(reported) == sorted(session.scalars(select(Operation.id)))
    assert _metric(app, "tms_commit_batch_size_count") - batches_before < len(payloads)


def _metric(app: Any, name: str) -> float:
    with TestClient(app) as client:
        text = client.get("/metrics").text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def test_callback_endpoint_errors(make_client: MakeClient) -> None:
    client = make_client(max_callback_bytes=1000)
    url = "/v1/hoodie/service/commit"
    key = {"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}
    wrong_method = client.get(url)
    assert (wrong_method.status_code, wrong_method.headers["allow"]) == (405, "POST")
    garbage = client.post(url, content=b"{not json", headers=key)
    assert garbage.status_code == 422
    assert garbage.json()["error"]["field"] == "body"
    big = callback_payload(instant(), stats=[write_stat(log=True)] * 10)
    too_big = client.post(url, json=big, headers=key)
    assert (too_big.status_code, too_big.json()["error"]["code"]) == (413, "payload_too_large")
    assert too_big.json()["error"]["field"] == "body"
    documented = client.get("/openapi.json").json()
    post = documented["paths"][url]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/CallbackIn"
    )
    assert "WriteStatIn" in documented["components"]["schemas"]
