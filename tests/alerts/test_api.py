"""Alerts in the API: on their operation, and listed at /v1/alerts for viewers."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, get_args

import pytest
from sqlalchemy.orm import Session, sessionmaker
from starlette.exceptions import StarletteDeprecationWarning

from tests.alerts.helpers import alerts, fail_for_good, settings
from tests.alerts.webhook import webhook
from tests.store.helpers import make_table
from tms.alerts import AlertDelivery
from tms.api import create_app
from tms.api.routes.alerts import AlertKind
from tms.store import ALERT_KINDS, raise_silent_tables

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from starlette.testclient import TestClient

VIEWER = "v1ewer-alerts-4e1f"
WRITER = "wr1ter-alerts-0b2c"


@pytest.fixture
def client(factory: sessionmaker[Session]) -> Iterator[TestClient]:
    app = create_app(settings(auth_tokens=f"viewer:{VIEWER},writer:{WRITER}"), factory)
    with TestClient(app) as client:
        client.headers["Authorization"] = f"Bearer {VIEWER}"
        yield client


def _get(client: TestClient, path: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_operation_shows_its_alerts_and_their_delivery(
    client: TestClient, factory: sessionmaker[Session], session: Session
) -> None:
    operation = fail_for_good(session)
    (alert,) = alerts(session)
    with webhook(500, 200) as hook:
        delivery = AlertDelivery(factory, settings(alert_webhook_url=hook.url))
        delivery.run(now=alert.created_at)
        delivery.run(now=alert.created_at + timedelta(minutes=1))

    shown = _get(client, f"/v1/operations/{operation.id}")

    assert shown["status"] == "FAILED"
    (brief,) = shown["alerts"]
    assert brief["id"] == alert.id
    assert brief["kind"] == "operation_failed"
    assert (brief["status"], brief["deliveries"]) == ("DELIVERED", 2)
    assert brief["last_error"].startswith("HTTP 500")
    assert brief["created_at"] and brief["delivered_at"]
    listed = _get(client, "/v1/operations")["items"]
    assert "alerts" not in listed[0]  # the list stays cheap


def test_alerts_are_listed_newest_first_with_filters_and_pages(
    client: TestClient, session: Session
) -> None:
    failed = [fail_for_good(session, name) for name in ("a", "b", "c")]
    quiet = make_table(session, "quiet")
    raise_silent_tables(
        session,
        timeout_seconds=1,
        silent_timeouts=1,
        now=quiet.created_at + timedelta(days=1),
    )
    session.commit()

    everything = _get(client, "/v1/alerts")["items"]
    assert [a["id"] for a in everything] == sorted((a["id"] for a in everything), reverse=True)
    assert len(everything) == 7  # 3 failed operations; 4 silent tables
    kinds = _get(client, "/v1/alerts", kind="operation_failed")["items"]
    assert sorted(a["operation_id"] for a in kinds) == sorted(op.id for op in failed)
    assert kinds[0]["payload"]["operation"]["status"] == "FAILED"
    (mine,) = _get(client, "/v1/alerts", table_id=quiet.id)["items"]
    assert mine["kind"] == "table_silent" and mine["payload"]["table"]["table_name"] == "quiet"
    assert len(_get(client, "/v1/alerts", status="PENDING")["items"]) == 7
    assert _get(client, "/v1/alerts", status="DELIVERED")["items"] == []

    first = _get(client, "/v1/alerts", limit=4)
    rest = _get(client, "/v1/alerts", limit=4, cursor=first["next_cursor"])
    assert [a["id"] for a in first["items"] + rest["items"]] == [a["id"] for a in everything]
    assert rest["next_cursor"] is None


def test_listing_alerts_needs_a_viewer_and_valid_filters(client: TestClient) -> None:
    assert client.get("/v1/alerts", headers={"Authorization": ""}).status_code == 401
    for params in ({"status": "LOST"}, {"kind": "nope"}, {"cursor": "x"}, {"limit": 0}):
        response = client.get("/v1/alerts", params=params)
        assert response.status_code == 422, params
        assert response.json()["error"]["field"].startswith("query.")


def test_the_kinds_the_api_filters_on_are_the_stores() -> None:
    assert get_args(AlertKind) == ALERT_KINDS
