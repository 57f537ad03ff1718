"""The partition TTL policy: off unless a table sets its `ttl_days` (and enables
`partition_ttl`); then the scheduler creates a partition TTL carrying the table's TTL
settings at most once per interval (a day unless `ttl_interval_hours` says otherwise), with
or without new commits, never while one is pending."""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker
from starlette.testclient import TestClient

from tests.api.helpers import register
from tests.store.helpers import db_now, make_table
from tms.application import OperationManager, apply_triggers
from tms.config import load_settings
from tms.ingest.pulled import PulledCommit, PulledTimeline
from tms.scheduler.pull import PullSweep
from tms.store import (
    PullTarget,
    ServiceAction,
    TableType,
    cancel_scheduled,
    counted_tables,
    get_table,
    list_events,
    list_operations,
    session_scope,
)

TTL = ServiceAction.PARTITION_TTL
POLICY = {"ttl_days": 90, "ttl_partitions": ["dt=2025-*"], "ttl_max_partitions": 10}


class QuietStorage:
    """Every table's timeline, with no commit the store has not heard of."""

    def timeline(self, target: PullTarget) -> PulledTimeline:
        return PulledTimeline(timeline=None)  # type: ignore[arg-type]

    def new_commits(self, pulled: PulledTimeline, known: Collection[str]) -> list[PulledCommit]:
        return []


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_scheduler_creates_a_partition_ttl_only_for_a_table_that_set_one(
    factory: sessionmaker[Session],
) -> None:
    with session_scope(factory) as session:
        ttl = make_table(session, "events", enabled_actions=[TTL], policy=POLICY).id
        unset = make_table(session, "plain", enabled_actions=[TTL]).id
        off = make_table(session, "notenabled", policy=POLICY).id
    settings = load_settings(
        config_file=False, environ={}, pull_listings_per_minute=600, scheduler_interval_seconds=1
    )
    sweep = PullSweep(
        factory, OperationManager(settings), "i1", reader=QuietStorage(), clock=Clock()
    )
    report = sweep.run()  # no commit at all: partitions age with the clock
    assert sorted(report.pulled) == sorted([ttl, unset, off])
    assert report.new_commits == {ttl: 0, unset: 0, off: 0}
    assert report.operations[unset] == report.operations[off] == []
    with session_scope(factory) as session:
        assert list_operations(session, tbl_id=unset) == []
        assert list_operations(session, tbl_id=off) == []
        (operation,) = list_operations(session, tbl_id=ttl)
        assert report.operations[ttl] == [operation.id]
        assert (operation.action, operation.instant) == (TTL, None)
        assert operation.extra_params == {
            "ttl_days": 90,
            "ttl_partitions": ["dt=2025-*"],
            "ttl_max_partitions": 10,
        }
        (event,) = list_events(session, operation.id)
        assert event.reason == "policy: no partition TTL yet (interval 24)"
        assert get_table(session, ttl).last_partition_ttl_at is not None
        assert get_table(session, unset).last_partition_ttl_at is None


def decide(session: Session, tbl_id: int, hours_later: float) -> list[Any]:
    settings = load_settings(config_file=False, environ={})
    tables = counted_tables(session, [tbl_id])
    when = db_now(session) + timedelta(hours=hours_later)
    return apply_triggers(session, tables, settings, now=when).get(tbl_id, [])


def test_one_per_interval_and_none_while_one_is_pending(session: Session) -> None:
    policy = {**POLICY, "ttl_interval_hours": 6}
    table = make_table(session, table_type=TableType.COPY_ON_WRITE, enabled_actions=[TTL])
    assert decide(session, table.id, 0) == []  # no TTL set
    table.policy = policy
    session.flush()
    (first,) = decide(session, table.id, 0)
    assert decide(session, table.id, 100) == []  # the first one is still scheduled
    cancel_scheduled(session, first.id, reason="test")
    assert decide(session, table.id, 5.9) == []  # within the interval since the first
    (second,) = decide(session, table.id, 6)
    assert second.extra_params == POLICY
    (event,) = list_events(session, second.id)
    assert event.reason == "policy: 6.0 hours since the last partition TTL (interval 6)"


def test_the_api_takes_the_ttl_settings_and_refuses_them_without_days(
    client: TestClient,
) -> None:
    table_id = register(client)["id"]
    policy = {**POLICY, "ttl_interval_hours": 12}
    patched = client.patch(
        f"/v1/tables/{table_id}",
        json={"policy": policy, "enabled_actions": ["compaction", "clean", "partition_ttl"]},
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["policy"] == policy
    assert body["thresholds"]["ttl_interval_hours"] == 12
    assert body["enabled_actions"] == ["compaction", "clean", "partition_ttl"]
    triggered = {"ttl_days": 30, "triggers": {"partition_ttl": {"interval_hours": 1.5}}}
    patched = client.patch(f"/v1/tables/{table_id}", json={"policy": triggered})
    assert patched.status_code == 200, patched.text
    for bad, where in (
        ({"ttl_partitions": ["dt=2025-*"]}, "body.policy"),
        ({"ttl_interval_hours": 6}, "body.policy"),
        ({"triggers": {"partition_ttl": {"interval_hours": 6}}}, "body.policy"),
        ({"ttl_days": 0}, "body.policy.ttl_days"),
        ({"ttl_days": 36_501}, "body.policy.ttl_days"),
        ({"ttl_days": "90"}, "body.policy.ttl_days"),
        ({"ttl_days": 9, "ttl_max_partitions": 0}, "body.policy.ttl_max_partitions"),
        ({"ttl_days": 9, "ttl_partitions": [""]}, "body.policy.ttl_partitions.0"),
        ({"ttl_days": 9, "ttl_partitions": "dt=*"}, "body.policy.ttl_partitions"),
        ({"ttl_days": 9, "ttl_interval_hours": -1}, "body.policy.ttl_interval_hours"),
        (
            {
                "ttl_days": 9,
                "ttl_interval_hours": 6,
                "triggers": {"partition_ttl": {"interval_hours": 1}},
            },
            "body.policy.triggers.partition_ttl",
        ),
        (
            {"ttl_days": 9, "triggers": {"partition_ttl": {"elapsed_hours": 1}}},
            "body.policy.triggers.partition_ttl.elapsed_hours",
        ),
    ):
        response = client.patch(f"/v1/tables/{table_id}", json={"policy": bad})
        assert response.status_code == 422, (bad, response.text)
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("validation_error", where), (bad, error)
    refused = client.patch(f"/v1/tables/{table_id}", json={"policy": {"ttl_interval_hours": 6}})
    assert "ttl_interval_hours need ttl_days" in refused.json()["error"]["message"]
