"""Delivering alerts to a real local webhook: retried with backoff until it accepts,
FAILED once out of tries, never twice at once, counted by `tms_alerts_total`.

Times are pinned (`run(now=…)` sets the database clock the claims and backoff use), so
nothing here waits or reads the wall clock."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from tests.alerts.helpers import alerts, counted, fail_for_good, set_table, settings
from tests.alerts.webhook import webhook
from tests.store.helpers import make_table
from tms.alerts import AlertDelivery
from tms.store import (
    OPERATION_FAILED,
    TABLE_SILENT,
    AlertStatus,
    claim_due_alerts,
    session_scope,
)

S = AlertStatus


def test_a_failed_operation_is_delivered_on_the_third_try_after_backoff(
    factory: sessionmaker[Session], session: Session
) -> None:
    operation = fail_for_good(session, error="plan refused: unsupported table")
    (alert,) = alerts(session)
    t0 = alert.created_at
    before = {o: counted(OPERATION_FAILED, o) for o in ("delivered", "retried", "failed")}

    with webhook(500, 500, 200) as hook:
        delivery = AlertDelivery(factory, settings(alert_webhook_url=hook.url))
        assert delivery.run(now=t0) == 1  # HTTP 500: retried after 60 s
        assert delivery.run(now=t0 + timedelta(seconds=59)) == 0  # not due yet
        assert delivery.run(now=t0 + timedelta(seconds=60)) == 1  # HTTP 500: 120 s more
        assert delivery.run(now=t0 + timedelta(seconds=179)) == 0
        assert delivery.run(now=t0 + timedelta(seconds=180)) == 1  # accepted
        assert delivery.run(now=t0 + timedelta(days=1)) == 0  # nothing left to deliver

    session.expire_all()
    (done,) = alerts(session)
    assert (done.status, done.deliveries) == (S.DELIVERED, 3)
    assert done.delivered_at == t0 + timedelta(seconds=180)
    assert done.last_error == "HTTP 500: webhook down for maintenance"
    assert len(hook.received) == 3
    first = hook.received[0]
    assert first.path == "/hooks/tms"
    assert all(r.body == first.body for r in hook.received)  # the same alert each time
    assert first.headers["content-type"] == "application/json"
    assert first.headers["user-agent"] == "tms"
    assert first.headers["idempotency-key"] == f"tms-alert-{alert.id}"
    assert first.headers["x-tms-alert-id"] == str(alert.id)
    body = first.body
    assert body["alert_id"] == alert.id and body["kind"] == OPERATION_FAILED
    assert body["table"]["table_name"] == "trips" and body["table"]["db_name"] == "db"
    assert body["operation"]["id"] == operation.id
    assert body["operation"]["status"] == "FAILED"
    assert body["attempts"][0]["error"] == "plan refused: unsupported table"
    assert body["last_error"] == "plan refused: unsupported table"
    assert counted(OPERATION_FAILED, "retried") == before["retried"] + 2
    assert counted(OPERATION_FAILED, "delivered") == before["delivered"] + 1
    assert counted(OPERATION_FAILED, "failed") == before["failed"]


def test_an_alert_is_failed_after_its_last_try(
    factory: sessionmaker[Session], session: Session
) -> None:
    fail_for_good(session)
    (alert,) = alerts(session)
    before = counted(OPERATION_FAILED, "failed")

    with webhook(503) as hook:
        delivery = AlertDelivery(
            factory, settings(alert_webhook_url=hook.url, alert_max_deliveries=3)
        )
        now = alert.created_at
        tries = 0
        for _ in range(10):  # bounded: 3 tries, then nothing is due
            tries += delivery.run(now=now)
            now += timedelta(hours=1)

    session.expire_all()
    (failed,) = alerts(session)
    assert (failed.status, failed.deliveries, tries) == (S.FAILED, 3, 3)
    assert failed.delivered_at is None and failed.last_error is not None
    assert failed.last_error.startswith("HTTP 503")
    assert len(hook.received) == 3
    assert counted(OPERATION_FAILED, "failed") == before + 1


def test_an_unreachable_webhook_counts_a_try_and_ends_the_round(
    factory: sessionmaker[Session], session: Session
) -> None:
    fail_for_good(session, "a")
    fail_for_good(session, "b")
    with webhook(200) as hook:
        url = hook.url  # closed again: nothing listens there any more
    delivery = AlertDelivery(factory, settings(alert_webhook_url=url))
    now = max(a.created_at for a in alerts(session))

    assert delivery.run(now=now) == 1

    session.expire_all()
    tried, waiting = alerts(session)
    assert (tried.status, tried.deliveries) == (S.PENDING, 1)
    assert tried.last_error is not None and "Connect" in tried.last_error
    assert tried.next_attempt_at == now + timedelta(seconds=60)
    assert (waiting.status, waiting.deliveries) == (S.PENDING, 0)


def test_without_a_webhook_alerts_are_recorded_and_wait(
    factory: sessionmaker[Session], session: Session
) -> None:
    fail_for_good(session)
    delivery = AlertDelivery(factory, settings())

    assert delivery.run(now=alerts(session)[0].created_at + timedelta(days=1)) == 0

    session.expire_all()
    (alert,) = alerts(session)
    assert (alert.status, alert.deliveries) == (S.PENDING, 0)


def test_a_silent_table_is_raised_by_the_round_and_delivered(
    factory: sessionmaker[Session], session: Session
) -> None:
    table = make_table(session)
    set_table(session, table.id, last_commit_seen_at=None)
    session.commit()
    before = counted(TABLE_SILENT, "raised")
    ticks = iter(range(0, 1000, 40))  # monotonic seconds: each round is a new sweep

    with webhook(200) as hook:
        delivery = AlertDelivery(
            factory,
            settings(alert_webhook_url=hook.url, notification_timeout_seconds=60),
            clock=lambda: float(next(ticks)),
        )
        later = table.created_at + timedelta(seconds=181)
        assert delivery.run(now=later) == 1
        assert delivery.run(now=later + timedelta(hours=1)) == 0  # once per silence

    (received,) = hook.received
    assert received.body["kind"] == TABLE_SILENT
    assert received.body["table"]["id"] == table.id
    assert received.body["timeout_seconds"] == 60
    assert received.body["last_notification_at"] is None
    assert counted(TABLE_SILENT, "raised") == before + 1


def test_a_claimed_alert_is_left_alone_by_other_instances(
    factory: sessionmaker[Session], session: Session
) -> None:
    fail_for_good(session)
    now = alerts(session)[0].created_at

    with session_scope(factory) as first:
        (claimed,) = claim_due_alerts(first, limit=5, lease_seconds=30, now=now)
        with session_scope(factory) as second:  # the row is locked: skipped, not waited on
            assert claim_due_alerts(second, limit=5, lease_seconds=30, now=now) == []
    with session_scope(factory) as third:  # committed: its lease keeps it
        assert claim_due_alerts(third, limit=5, lease_seconds=30, now=now) == []
        later = now + timedelta(seconds=31)  # lease over (that instance died mid-try)
        (again,) = claim_due_alerts(third, limit=5, lease_seconds=30, now=later)
    assert again.id == claimed.id


def test_a_round_runs_in_the_background_at_most_every_second(
    factory: sessionmaker[Session],
) -> None:
    ticks = [0.0]
    delivery = AlertDelivery(factory, settings(), clock=lambda: ticks[0])
    started = threading.active_count()

    assert delivery.maybe_start()
    delivery.join(30)
    assert not delivery.maybe_start()  # within the interval: nothing new
    ticks[0] = 1.5
    assert delivery.maybe_start()
    delivery.join(30)

    assert threading.active_count() == started
