"""Hudi's HTTP commit callback with the payload released writers send."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tests.api.conftest import WRITER, MakeClient, bearer
from tests.api.helpers import callback_payload, instant, notify, register
from tms.hudi.writer import HudiWriter
from tms.store import Commit, Operation, Tbl

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def _ops(session: Session) -> list[tuple[str, str | None, str]]:
    rows = session.scalars(select(Operation).order_by(Operation.id)).all()
    return [(op.action.value, op.instant, op.status.value) for op in rows]


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
