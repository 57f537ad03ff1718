"""`tms serve` and `tms db upgrade` as real processes, and `serve_in_thread`, on real
PostgreSQL: a fresh test database, or the embedded default."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.db_fixtures import PgServer
from tms.config import Settings, load_settings
from tms.serve import ServiceStartError, free_port, serve_in_thread
from tms.store import (
    head_revision,
    is_up_to_date,
    list_instances,
    make_engine,
    make_session_factory,
)

START_TIMEOUT = 90.0


class ServeProcess:
    """`python -m tms …` in `cwd` with a clean `TMS_*` environment, output in a file."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.log = cwd / "serve.log"
        base = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tms", *args],
                cwd=cwd,
                env={**base, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, url: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"tms serve exited early:\n{self.output()}"
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"not ready after {START_TIMEOUT}s:\n{self.output()}")

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


Spawn = Callable[[list[str], dict[str, str]], ServeProcess]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start `tms` commands in `tmp_path` (no conf/tms.toml there); killed if left running."""
    started: list[ServeProcess] = []

    def start(args: list[str], env: dict[str, str]) -> ServeProcess:
        process = ServeProcess(args, tmp_path, env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def test_serve_with_a_database_url_serves_and_stops_cleanly_on_sigterm(
    spawn: Spawn, db_url: str, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"TMS_DATABASE_URL": db_url, "TMS_DATA_DIR": str(tmp_path / "data")}
    service = spawn(["serve", "--port", str(port)], env)
    service.wait_ready(url)

    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{url}/readyz").json()["revision"] == head_revision()
    metrics = httpx.get(f"{url}/metrics")
    assert metrics.status_code == 200 and "tms_http_requests_total" in metrics.text
    docs = httpx.get(f"{url}/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    assert httpx.get(f"{url}/openapi.json").json()["info"]["title"] == "tms"

    engine = make_engine(db_url, pool_size=1)
    try:
        with make_session_factory(engine)() as session:
            assert len(list_instances(session)) == 1  # the scheduler registered itself
    finally:
        engine.dispose()

    assert service.terminate() == 0, service.output()
    out = service.output()
    assert f"tms at {url}" in out
    assert "PostgreSQL postgresql+psycopg://" in out and "auth OFF" in out
    assert "shut down after SIGTERM" in out and "tms stopped" in out


def test_serve_with_auth_tokens_says_auth_is_on_and_checks_tokens(
    spawn: Spawn, db_url: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "TMS_DATABASE_URL": db_url,
        "TMS_AUTH_TOKENS": "admin:adm-4a1f9c",
        "TMS_MAX_RUNNING_PER_INSTANCE": "0",
    }
    service = spawn(["serve", "--port", str(port)], env)
    service.wait_ready(url)
    assert httpx.get(f"{url}/v1/tables").status_code == 401
    ok = httpx.get(f"{url}/v1/tables", headers={"Authorization": "Bearer adm-4a1f9c"})
    assert ok.status_code == 200
    assert service.terminate() == 0
    out = service.output()
    assert "auth on" in out and "API only" in out


def test_serve_with_the_embedded_default(spawn: Spawn, tmp_path: Path) -> None:
    """No TMS_DATABASE_URL: an embedded PostgreSQL under TMS_DATA_DIR, stopped on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    data_dir = tmp_path / "data"
    service = spawn(["serve", "--port", str(port)], {"TMS_DATA_DIR": str(data_dir)})
    service.wait_ready(url)
    assert (data_dir / "pg" / "postmaster.pid").is_file()
    assert httpx.get(f"{url}/v1/operations").json()["items"] == []
    assert service.terminate() == 0, service.output()
    assert f"embedded PostgreSQL under {data_dir / 'pg'}" in service.output()
    assert not (data_dir / "pg" / "postmaster.pid").exists()  # the server was stopped


def test_db_upgrade_migrates_an_empty_database(
    pg_server: PgServer, tmp_path: Path, spawn: Spawn
) -> None:
    name = f"tms_upgrade_{os.getpid()}_{int(time.time() * 1000)}"
    pg_server.create_database(name)
    try:
        url = pg_server.url(name)
        upgrade = spawn(["db", "upgrade"], {"TMS_DATABASE_URL": url})
        assert upgrade.proc.wait(timeout=120) == 0, upgrade.output()
        assert f"database at revision {head_revision()}" in upgrade.output()
        engine = make_engine(url, pool_size=1)
        try:
            assert is_up_to_date(engine)
        finally:
            engine.dispose()
    finally:
        pg_server.drop_database(name)


def test_serve_refuses_a_busy_port_and_bad_settings(spawn: Spawn) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = spawn(["serve", "--port", str(port)], {})
        assert taken.proc.wait(timeout=60) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in taken.output()

    bad = spawn(["serve"], {"TMS_PORT": "ninety"})
    assert bad.proc.wait(timeout=60) == 2
    assert "TMS_PORT" in bad.output()


def test_serve_in_thread_runs_the_api_and_the_scheduler(db_url: str, tmp_path: Path) -> None:
    settings = load_settings(
        config_file=False,
        environ={},
        database_url=db_url,
        data_dir=tmp_path / "data",
        port=free_port(),
    )
    with serve_in_thread(settings) as service:
        assert service.url == f"http://127.0.0.1:{settings.port}"
        assert httpx.get(f"{service.url}/readyz").status_code == 200
        with service.database.factory() as session:
            assert len(list_instances(session)) == 1
        with pytest.raises(ServiceStartError, match="cannot listen"):
            serve_in_thread(settings)  # the same port again
    assert not service.thread.is_alive()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{service.url}/healthz", timeout=2)


def _api_only(db_url: str, tmp_path: Path, **overrides: object) -> Settings:
    return load_settings(
        config_file=False,
        environ={},
        database_url=db_url,
        data_dir=tmp_path / "data",
        port=free_port(),
        max_running_per_instance=0,
        **overrides,
    )


def test_a_statement_that_times_out_answers_503(db_url: str, tmp_path: Path) -> None:
    settings = _api_only(db_url, tmp_path, db_statement_timeout_seconds=0.5)
    libpq_url = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with serve_in_thread(settings) as service, psycopg.connect(libpq_url) as blocker:
        blocker.execute("LOCK TABLE tbl IN ACCESS EXCLUSIVE MODE")  # held until rollback
        # Without a statement timeout the request would wait for the lock (the client's
        # timeout is a generous bound, far above the 0.5 s setting).
        blocked = httpx.get(f"{service.url}/v1/tables", timeout=30)
        assert blocked.status_code == 503
        assert blocked.json()["error"]["code"] == "database_unavailable"
        assert "statement timeout" not in blocked.text  # driver texts stay in the log
        blocker.rollback()
        assert httpx.get(f"{service.url}/v1/tables", timeout=30).status_code == 200


def test_a_full_pool_answers_503_after_the_checkout_timeout(db_url: str, tmp_path: Path) -> None:
    settings = _api_only(db_url, tmp_path, db_pool_size=1, db_pool_timeout_seconds=0.5)
    with serve_in_thread(settings) as service:
        engine = service.database.engine
        held = [engine.connect(), engine.connect()]  # the pool (1) and its overflow (1)
        try:
            full = httpx.get(f"{service.url}/v1/tables", timeout=30)
            assert full.status_code == 503
            assert full.json()["error"]["code"] == "database_unavailable"
        finally:
            for connection in held:
                connection.close()
        assert httpx.get(f"{service.url}/v1/tables", timeout=30).status_code == 200


def test_the_timeline_server_routes_can_have_a_port_of_their_own(
    spawn: Spawn, db_url: str, tmp_path: Path
) -> None:
    """With `TMS_TIMELINE_SERVER_PORT`, the credential-less routes answer only there and the
    API only on its own port, so each can be exposed to different networks."""
    port, timeline_port = free_port(), free_port()
    url, timeline_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{timeline_port}"
    env = {
        "TMS_DATABASE_URL": db_url,
        "TMS_DATA_DIR": str(tmp_path / "data"),
        "TMS_TIMELINE_SERVER_PORT": str(timeline_port),
    }
    service = spawn(["serve", "--port", str(port)], env)
    service.wait_ready(url)
    params = {"basepath": str(tmp_path / "nowhere")}
    on_api = httpx.get(f"{url}/v1/hoodie/view/timeline/instants/all", params=params)
    assert on_api.status_code == 404 and "timeline_server_port" in on_api.text
    on_own = httpx.get(f"{timeline_url}/v1/hoodie/view/timeline/instants/all", params=params)
    assert on_own.status_code == 404 and on_own.json()["error"]["field"] == "basepath"
    assert httpx.get(f"{timeline_url}/v1/tables").status_code == 404
    assert httpx.get(f"{url}/v1/tables").status_code == 200
    assert service.terminate() == 0, service.output()
    assert f"timeline server on port {timeline_port}" in service.output()
