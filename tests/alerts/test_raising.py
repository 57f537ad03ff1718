"""Raising alerts: in the transaction that fails an operation for good, once per key; and
the sweep of silent tables."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session

from tests.alerts.helpers import NO_JITTER, alerts, counted, fail_for_good, set_table
from tests.store.helpers import claim, db_now, make_op, make_table
from tms.application.attempt_end import Failed, finish_attempt, reap_expired_leases
from tms.store import (
    OPERATION_FAILED,
    TABLE_SILENT,
    AlertStatus,
    AttemptOutcome,
    OperationStatus,
    alerts_of_operation,
    list_attempts,
    raise_alert,
    raise_silent_tables,
    retry_operation,
    update_table,
)


def test_an_operation_that_fails_for_good_raises_one_alert_with_its_story(session: Session) -> None:
    before = counted(OPERATION_FAILED, "raised")
    operation = fail_for_good(session, error="unsupported table: bad plan\n  at line 3")

    (alert,) = alerts(session)
    assert (alert.kind, alert.status, alert.deliveries) == (
        OPERATION_FAILED,
        AlertStatus.PENDING,
        0,
    )
    assert alert.operation_id == operation.id and alert.tbl_id == operation.tbl_id
    (ran,) = list_attempts(session, operation.id)
    assert alert.dedupe_key == f"operation_failed:{operation.id}:{ran.id}"
    payload = alert.payload
    assert payload["kind"] == OPERATION_FAILED
    assert payload["table"] == {
        "id": operation.tbl_id,
        "db_name": "db",
        "table_name": "trips",
        "base_path": "/data/trips",
    }
    assert payload["operation"] == {
        "id": operation.id,
        "action": "compaction",
        "instant": operation.instant,
        "status": "FAILED",
        "queue": "default",
        "owner": "team-a",
    }
    (attempt,) = payload["attempts"]
    assert attempt["number"] == 1 and attempt["outcome"] == "FAILED"
    assert attempt["exit_code"] == 1 and attempt["error"].startswith("unsupported table")
    assert attempt["started_at"] and attempt["finished_at"]
    assert payload["last_error"] == "unsupported table: bad plan\n  at line 3"
    assert payload["raised_at"]
    assert counted(OPERATION_FAILED, "raised") == before + 1


def test_a_retry_raises_nothing_and_each_failure_for_good_raises_again(session: Session) -> None:
    table = make_table(session)
    operation = make_op(session, table, max_retries=1)
    first = claim(session)[0]
    retried = finish_attempt(
        session, first.attempt, Failed("executor lost", retryable=True), backoff=NO_JITTER
    )
    assert retried is not None and retried.operation.status is OperationStatus.SCHEDULED
    assert alerts(session) == []

    later = db_now(session) + timedelta(hours=1)
    second = claim(session, now=later)[0]
    out = finish_attempt(
        session, second.attempt, Failed("executor lost", retryable=True), backoff=NO_JITTER
    )
    assert out is not None and out.operation.status is OperationStatus.FAILED
    (alert,) = alerts(session)
    assert [a["number"] for a in alert.payload["attempts"]] == [1, 2]

    retry_operation(session, operation.id)  # the operator's retry: a new cycle
    third = claim(session, now=later + timedelta(hours=1))[0]
    finish_attempt(session, third.attempt, Failed("still", retryable=False), backoff=NO_JITTER)
    session.commit()

    raised = alerts_of_operation(session, operation.id)
    assert len(raised) == 2
    assert raised[1].payload["last_error"] == "still"
    assert [a["number"] for a in raised[1].payload["attempts"]] == [1, 2, 3]


def test_a_lost_attempt_out_of_retries_raises_an_alert(session: Session) -> None:
    table = make_table(session)
    operation = make_op(session, table, max_retries=0)
    claim(session, lease_seconds=1)
    later = db_now(session) + timedelta(seconds=5)

    (reaped,) = reap_expired_leases(session, backoff=NO_JITTER, now=later)

    assert reaped.operation.status is OperationStatus.FAILED
    (alert,) = alerts_of_operation(session, operation.id)
    assert alert.payload["attempts"][0]["outcome"] == AttemptOutcome.LOST.value
    assert "lost" in alert.payload["last_error"]
    assert alert.created_at == later


def test_a_rolled_back_failure_leaves_no_alert_and_counts_nothing(session: Session) -> None:
    table = make_table(session)
    make_op(session, table)
    session.commit()
    (claimed,) = claim(session)
    session.commit()
    before = counted(OPERATION_FAILED, "raised")

    finish_attempt(session, claimed.attempt, Failed("x", retryable=False), backoff=NO_JITTER)
    session.rollback()

    assert alerts(session) == []
    assert counted(OPERATION_FAILED, "raised") == before


def test_raising_the_same_key_again_is_a_no_op(session: Session) -> None:
    table = make_table(session)
    values: dict[str, Any] = {"kind": "table_silent", "tbl_id": table.id, "operation_id": None}

    first = raise_alert(session, **values, payload={"n": 1}, dedupe_key="k")
    again = raise_alert(session, **values, payload={"n": 2}, dedupe_key="k")

    assert first is not None and again is None
    assert [a.payload for a in alerts(session)] == [{"n": 1}]


def test_a_table_silent_for_n_timeouts_alerts_once_per_silence(session: Session) -> None:
    table = make_table(session)
    set_table(session, table.id, last_notification_at=None, last_commit_seen_at=None)
    session.commit()
    start = table.created_at
    sweep: dict[str, Any] = {"timeout_seconds": 100.0, "silent_timeouts": 3}

    assert raise_silent_tables(session, **sweep, now=start + timedelta(seconds=299)) == []
    (alert,) = raise_silent_tables(session, **sweep, now=start + timedelta(seconds=301))
    assert raise_silent_tables(session, **sweep, now=start + timedelta(seconds=900)) == []

    assert alert.kind == TABLE_SILENT and alert.operation_id is None
    assert alert.dedupe_key == f"table_silent:{table.id}:never"
    payload = alert.payload
    assert payload["table"]["id"] == table.id
    assert payload["last_commit_seen_at"] is None and payload["last_pulled_at"] is None
    assert payload["silent_seconds"] == 301 and payload["timeout_seconds"] == 100

    spoke = start + timedelta(seconds=1000)
    set_table(session, table.id, last_commit_seen_at=spoke)
    assert raise_silent_tables(session, **sweep, now=spoke + timedelta(seconds=200)) == []
    (again,) = raise_silent_tables(session, **sweep, now=spoke + timedelta(seconds=400))
    assert again.dedupe_key.startswith(f"table_silent:{table.id}:20")
    assert again.payload["last_commit_seen_at"] == spoke.isoformat()
    assert len(alerts(session)) == 2


def test_the_silence_timeout_comes_from_the_policy_and_zero_means_never(session: Session) -> None:
    never = make_table(session, "never", policy={"notification_timeout_seconds": 0})
    longer = make_table(session, "longer", policy={"notification_timeout_seconds": 1000})
    shorter = make_table(session, "shorter", policy={"notification_timeout_seconds": 10})
    odd = make_table(session, "odd", policy={"notification_timeout_seconds": "10"})
    paused = make_table(session, "paused")
    update_table(session, paused.id, paused=True)
    session.commit()
    now = max(t.created_at for t in (never, longer, shorter, odd, paused))
    now += timedelta(seconds=301)

    raised = raise_silent_tables(session, timeout_seconds=100, silent_timeouts=3, now=now)
    assert sorted(a.tbl_id for a in raised) == sorted([shorter.id, odd.id])
    assert raise_silent_tables(session, timeout_seconds=0, silent_timeouts=3, now=now) == []

    quiet = make_table(session, "quiet")
    later = quiet.created_at + timedelta(days=365)
    raised = raise_silent_tables(session, timeout_seconds=0, silent_timeouts=3, now=later)
    assert sorted(a.tbl_id for a in raised) == [longer.id]  # only its own timeout counts
