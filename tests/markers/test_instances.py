"""Several instances behind one address: one serves a table's markers (its PostgreSQL
advisory lock), the others forward its requests there; when it stops, another takes the
table over and reads its markers back from storage. Two real servers (uvicorn) on one
database."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import uvicorn
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from tests.api.conftest import make_settings
from tests.markers.conftest import BASE, Table
from tms.api import create_app
from tms.markers import FORWARDED_HEADER
from tms.store import marker_owners

INSTANT = "20260101120000000"
TIMEOUT = 120.0
"""Seconds a request may take: generous, so a loaded machine slows the test, never fails it."""


@dataclass
class Instance:
    url: str
    server: uvicorn.Server
    thread: threading.Thread
    app: object

    def stop(self) -> None:
        self.app.state.markers.close()  # type: ignore[attr-defined]
        self.server.should_exit = True
        self.thread.join(30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def instance(factory: sessionmaker[Session]) -> Iterator[Instance]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = create_app(make_settings(public_url=url, marker_batch_interval_ms=5), factory)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + TIMEOUT
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    running = Instance(url, server, thread, app)
    try:
        yield running
    finally:
        if thread.is_alive():
            running.stop()


def create(url: str, marker_dir: str, name: str) -> object:
    answer = httpx.post(
        f"{url}{BASE}/create",
        params={"markerdirpath": marker_dir, "markername": name},
        timeout=TIMEOUT,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def all_markers(url: str, marker_dir: str) -> list[str]:
    answer = httpx.get(f"{url}{BASE}/all", params={"markerdirpath": marker_dir}, timeout=TIMEOUT)
    assert answer.status_code == 200, answer.text
    return sorted(answer.json())


def owner_of(engine: Engine, base_path: str) -> str | None:
    with engine.connect() as connection:
        return marker_owners.owner_address(connection, marker_owners.marker_key(base_path))


def test_one_instance_serves_a_table_the_others_forward_and_take_over_when_it_stops(
    factory: sessionmaker[Session], engine: Engine, table: Table
) -> None:
    marker_dir = table.marker_dir(INSTANT)
    table.begin(INSTANT)
    first, second = (f"f{i}-0_0-1-0_{INSTANT}.parquet.marker.CREATE" for i in (1, 2))
    with instance(factory) as a, instance(factory) as b:
        assert create(b.url, marker_dir, first) is True  # b is asked first: b serves it
        assert owner_of(engine, table.base_path) == b.url
        assert create(a.url, marker_dir, second) is True  # forwarded to b
        assert create(a.url, marker_dir, first) is False, "b's memory answers"
        assert all_markers(a.url, marker_dir) == sorted([first, second])
        served_by_b = b.app.state.markers.handler  # type: ignore[attr-defined]
        assert (table.base_path, INSTANT) in served_by_b._states
        assert not a.app.state.markers.handler._states  # type: ignore[attr-defined]

        refused = httpx.get(
            f"{a.url}{BASE}/all",
            params={"markerdirpath": marker_dir},
            headers={FORWARDED_HEADER: "1"},
            timeout=TIMEOUT,
        )
        assert refused.status_code == 503, "a forwarded request is not forwarded again"
        assert refused.json()["error"]["code"] == "marker_owner_unavailable"

        b.stop()
        assert owner_of(engine, table.base_path) is None
        assert all_markers(a.url, marker_dir) == sorted([first, second]), "read back"
        assert owner_of(engine, table.base_path) == a.url
        assert create(a.url, marker_dir, second) is False
        third = f"f3-0_0-1-0_{INSTANT}.parquet.marker.CREATE"
        assert create(a.url, marker_dir, third) is True


def test_requests_for_a_table_whose_owner_does_not_answer_are_refused_with_503(
    factory: sessionmaker[Session], engine: Engine, table: Table
) -> None:
    """An owner that holds the lock but does not serve (hung, or its address wrong) makes
    the others answer 503: Hudi's client fails the request, never a marker lost."""
    dead = f"http://127.0.0.1:{free_port()}"
    with engine.connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        connection.execute(text("SELECT set_config('application_name', :a, false)"), {"a": dead})
        assert marker_owners.try_own(connection, marker_owners.marker_key(table.base_path))
        with instance(factory) as a:
            answer = httpx.post(
                f"{a.url}{BASE}/create",
                params={
                    "markerdirpath": table.marker_dir(INSTANT),
                    "markername": f"f1-0_0-1-0_{INSTANT}.parquet.marker.CREATE",
                },
                timeout=TIMEOUT,
            )
            assert answer.status_code == 503, answer.text
            assert dead in answer.json()["error"]["message"]
        connection.invalidate()  # out of the pool, with its lock and its name


def test_an_owner_whose_connection_broke_drops_its_tables_and_forwards_to_the_new_owner(
    factory: sessionmaker[Session], engine: Engine, table: Table
) -> None:
    marker_dir = table.marker_dir(INSTANT)
    table.begin(INSTANT)
    first, second = (f"f{i}-0_0-1-0_{INSTANT}.parquet.marker.CREATE" for i in (1, 2))
    with instance(factory) as a, instance(factory) as b:
        b.app.state.markers.ownership._check_seconds = 0.0  # type: ignore[attr-defined]
        assert create(b.url, marker_dir, first) is True
        with engine.connect() as connection:  # the database drops b's owner connection
            killed = connection.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = :url"
                ),
                {"url": b.url},
            )
            assert killed == 1
        assert create(a.url, marker_dir, second) is True  # a takes the table over
        assert owner_of(engine, table.base_path) == a.url
        assert all_markers(b.url, marker_dir) == sorted([first, second]), "b forwards to a"
        assert not b.app.state.markers.handler._states  # type: ignore[attr-defined]
        assert create(b.url, marker_dir, first) is False
