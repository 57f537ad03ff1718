"""/healthz, /readyz, /metrics and the OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sqlalchemy import Engine

from tests.api.conftest import make_settings
from tests.api.helpers import callback_payload, instant, notify, register, submit
from tests.db_fixtures import PgServer
from tms.api import create_app
from tms.store import make_engine, make_session_factory

if TYPE_CHECKING:
    from starlette.testclient import TestClient


def _client_on(engine: Engine) -> TestClient:
    from starlette.testclient import TestClient

    return TestClient(create_app(make_settings(), make_session_factory(engine)))


def test_healthz_and_readyz(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_readyz_says_whether_the_hudi_executor_can_run(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ready either way (tms's own executor serves what it supports), saying why the Hudi
    executor is unavailable and what to do."""
    from starlette.testclient import TestClient

    monkeypatch.setenv("TMS_MAVEN_CACHE", str(tmp_path / "maven"))
    factory = make_session_factory(engine)
    cases = [
        (make_settings(hudi_jars="/opt/hudi/bundle.jar"), "available", "/opt/hudi/bundle.jar"),
        (make_settings(hudi_cache=tmp_path / "c1"), "absent", "fetched on first need"),
        (
            make_settings(hudi_cache=tmp_path / "c2", hudi_fetch=False),
            "unavailable",
            "TMS_HUDI_JARS",
        ),
    ]
    for settings, state, said in cases:
        with TestClient(create_app(settings, factory)) as client:
            ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        hudi = ready.json()["hudi_executor"]
        assert hudi["state"] == state and hudi["available"] is (state == "available")
        assert said in hudi["detail"]


@pytest.fixture
def empty_db(pg_server: PgServer) -> Iterator[Engine]:
    """A database the migrations never ran on."""
    name = f"tms_test_empty_{instant()}"
    pg_server.create_database(name)
    engine = make_engine(pg_server.url(name), pool_size=1)
    yield engine
    engine.dispose()
    pg_server.drop_database(name)


def test_readyz_503_when_migrations_are_missing(empty_db: Engine) -> None:
    with _client_on(empty_db) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["status"] == "not_ready"
    assert "migration None" in response.json()["reason"]


def test_readyz_503_when_the_database_is_unreachable() -> None:
    engine = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/none", pool_size=1)
    with _client_on(engine) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert "unreachable" in response.json()["reason"]
        # Other routes answer 503 with the error format, not a 500.
        listed = client.get("/v1/tables")
        assert listed.status_code == 503
        assert listed.json()["error"]["code"] == "database_unavailable"
        notified = client.post(
            "/v1/hoodie/service/commit",
            json=callback_payload(instant()),
            headers={"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"},
        )
        assert notified.status_code == 503
        assert notified.json()["error"]["code"] == "database_unavailable"
        assert client.get("/healthz").status_code == 200
        assert client.get("/metrics").status_code == 200
    engine.dispose()


def test_metrics_text(client: TestClient) -> None:
    register(client)
    submit(client, "clean", queue="etl").raise_for_status()
    notify(client, callback_payload(instant()))
    client.get("/v1/operations/12345")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'tms_operations{action="clean",status="SCHEDULED"} 1.0' in text
    assert 'tms_operations{action="compaction",status="FAILED"} 0.0' in text
    assert 'tms_queue_depth{queue="etl"} 1.0' in text
    assert 'tms_commit_notifications_total{result="new",source="callback"}' in text
    assert 'tms_operations_created_total{action="clean",origin="submit"}' in text
    # Route templates, never raw ids, label the HTTP metrics.
    assert (
        'tms_http_requests_total{method="GET",route="/v1/operations/{operation_id}",status="404"}'
        in text
    )
    assert "/v1/operations/12345" not in text
    assert 'route="/v1/hoodie/service/commit"' in text
    assert "tms_http_request_duration_seconds_bucket" in text


def test_openapi_documents_every_route(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/hoodie/service/register",
        "/v1/hoodie/service/compact/submit",
        "/v1/hoodie/service/cluster/remove",
        "/v1/hoodie/service/clean",
        "/v1/hoodie/service/commit",
        "/v1/tables/{table_id}/timeline",
        "/v1/operations/{operation_id}/retry",
        "/v1/jobs/attempts/{attempt_id}/result",
        "/readyz",
    ):
        assert path in paths, path
