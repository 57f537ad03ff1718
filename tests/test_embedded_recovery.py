"""`tms serve` on its embedded PostgreSQL survives the database dying: real `tms serve`
processes, real postmasters killed and stopped with signals."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest

from tests.test_serve import ServeProcess
from tms.embedded_postgres import BACKOFF_MAX_SECONDS, restart_delay
from tms.serve import free_port

WAIT_SECONDS = 120.0


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    """Poll `condition` until it holds; fail after `timeout` (a bound, not an expectation)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.2)


class Service:
    """One `tms serve` on an embedded database under `data_dir`."""

    def __init__(self, process: ServeProcess, url: str, data_dir: Path) -> None:
        self.process = process
        self.url = url
        self.pgdata = data_dir / "pg"

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", timeout=5)

    def answers(self, path: str, status: int) -> bool:
        try:
            return self.get(path).status_code == status
        except httpx.TransportError:
            return False

    def postmaster_pid(self) -> int:
        return int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])

    def restarts(self, result: str) -> float:
        found = re.search(
            rf'^tms_embedded_db_restarts_total\{{result="{result}"\}} (\S+)$',
            self.get("/metrics").text,
            re.MULTILINE,
        )
        return float(found.group(1)) if found else 0.0

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        """A connection of the test's own to the service database (not through the API)."""
        lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
        return psycopg.connect(
            host=lines[4], port=lines[3], user="postgres", dbname="tms", autocommit=True
        )


Start = Callable[[Path], Service]


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory outside pytest's base directory: as root the server runs as its own
    user, and a pytest session starting meanwhile makes that base directory private again."""
    path = Path(tempfile.mkdtemp(prefix="tms-recovery-"))
    yield path / "data"
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def start_service(tmp_path: Path, data_dir: Path) -> Iterator[Start]:
    """Services are stopped before `data_dir` is removed (the fixture depends on it)."""
    started: list[ServeProcess] = []

    def start(data_dir: Path) -> Service:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        process = ServeProcess(
            ["serve", "--port", str(port)],
            tmp_path,
            {"TMS_DATA_DIR": str(data_dir), "TMS_SCHEDULER_INTERVAL_SECONDS": "0.2"},
        )
        started.append(process)
        process.wait_ready(url)
        return Service(process, url, data_dir)

    yield start
    for process in started:
        if process.proc.poll() is None:
            process.terminate()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_killed_postmaster_is_restarted_and_the_service_works_again(
    start_service: Start, data_dir: Path
) -> None:
    service = start_service(data_dir)
    killed = service.postmaster_pid()
    os.kill(killed, signal.SIGKILL)

    wait_for(lambda: service.restarts("restarted") == 1, "the metric counts the restart")
    wait_for(lambda: service.answers("/readyz", 200), "/readyz answers 200 again")
    assert service.postmaster_pid() != killed and _alive(service.postmaster_pid())
    assert service.get("/healthz").status_code == 200

    # The API writes again (the pool holds no connection of the dead server)...
    registered = httpx.post(
        f"{service.url}/v1/hoodie/service/register?pending=true",
        json={"db_name": "lake", "table_name": "trips", "base_path": "/data/lake/trips"},
        timeout=10,
    )
    assert registered.status_code == 201, registered.text
    names = [t["table_name"] for t in service.get("/v1/tables").json()["items"]]
    assert names == ["trips"]
    # ... and the scheduler ticks again: its instance heartbeat moves past the restart.
    with service.connect() as conn:
        after = conn.execute("SELECT now()").fetchone()

        def heartbeat_after_restart() -> bool:
            row = conn.execute("SELECT max(heartbeat_at) FROM instance").fetchone()
            return row is not None and after is not None and row[0] > after[0]

        wait_for(heartbeat_after_restart, "the scheduler heartbeats its instance")

    restarted = service.postmaster_pid()
    assert service.process.terminate() == 0
    out = service.process.output()
    assert "is not running; restarting it" in out and "restarted (pid" in out
    assert not _alive(restarted)  # a clean stop stops the restarted server too


def test_backends_outliving_a_killed_postmaster_are_ended_and_it_restarts_at_once(
    start_service: Start, data_dir: Path
) -> None:
    service = start_service(data_dir)
    registered = httpx.post(
        f"{service.url}/v1/hoodie/service/register?pending=true",
        json={"db_name": "lake", "table_name": "trips", "base_path": "/data/lake/trips"},
        timeout=10,
    )
    assert registered.status_code == 201, registered.text
    # Two backends that outlive their postmaster: one in a long query (a backend notices
    # the postmaster's death only when it waits, not while it computes), one stopped.
    busy, stopped = service.connect(), service.connect()
    orphans = [busy.info.backend_pid, stopped.info.backend_pid]
    try:
        busy.pgconn.send_query(b"SELECT count(*) FROM generate_series(1, 10000000000)")
        with service.connect() as conn:

            def querying() -> bool:
                row = conn.execute(
                    "SELECT state FROM pg_stat_activity WHERE pid = %s", [orphans[0]]
                ).fetchone()
                return row is not None and row[0] == "active"

            wait_for(querying, "the long query runs")
        os.kill(orphans[1], signal.SIGSTOP)
        killed = service.postmaster_pid()
        os.kill(killed, signal.SIGKILL)

        # Their shared memory would keep the server from starting until they end.
        wait_for(lambda: service.restarts("restarted") == 1, "the restart", timeout=60)
        wait_for(lambda: service.answers("/readyz", 200), "/readyz answers 200 again")
        assert service.restarts("failed") == 0  # the first attempt started it
        assert not [pid for pid in orphans if _alive(pid)]
        assert service.postmaster_pid() != killed
        names = [t["table_name"] for t in service.get("/v1/tables").json()["items"]]
        assert names == ["trips"]  # the data written before the kill is there
        out = service.process.output()
        assert "ending 2 orphaned process(es)" in out
        assert all(f"{pid} " in out for pid in orphans), out
    finally:
        for pid in orphans:  # without the fix they would outlive the test
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        busy.close()
        stopped.close()


def test_healthz_fails_while_the_database_cannot_be_restarted(
    start_service: Start, data_dir: Path
) -> None:
    service = start_service(data_dir)
    conf = service.pgdata / "postgresql.conf"
    original = conf.read_text()
    # The running server read its configuration at start; a restart reads this one.
    with conf.open("a") as out:
        out.write("\nshared_buffers = 'not a size'\n")
    os.kill(service.postmaster_pid(), signal.SIGKILL)

    wait_for(lambda: service.answers("/healthz", 503), "/healthz fails")
    unhealthy = service.get("/healthz").json()
    assert unhealthy["status"] == "unhealthy"
    assert "restart(s) failed" in unhealthy["reason"]
    assert unhealthy["error"]["code"] == "unhealthy"
    assert service.get("/readyz").status_code == 503
    assert service.restarts("failed") >= 1
    tables = service.get("/v1/tables")
    assert tables.status_code == 503
    assert tables.json()["error"]["code"] == "database_unavailable"

    conf.write_text(original)  # the operator fixes the configuration
    wait_for(lambda: service.answers("/healthz", 200), "/healthz recovers")
    wait_for(lambda: service.answers("/readyz", 200), "/readyz recovers")
    assert service.restarts("restarted") == 1
    assert service.get("/v1/tables").status_code == 200
    assert 'postgresql.conf" contains errors' in service.process.output()  # the cause


def test_readyz_answers_503_while_the_postmaster_is_stopped(
    start_service: Start, data_dir: Path
) -> None:
    service = start_service(data_dir)
    pid = service.postmaster_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        # A stopped server accepts connections and never answers them: /readyz must
        # answer anyway (the client's 5 s timeout is generous; the bound is 1 s).
        for _ in range(3):
            stopped = service.get("/readyz")
            assert stopped.status_code == 503
            # "did not answer within 1s", or the connect timeout of an earlier check
            assert stopped.json()["error"]["code"] == "not_ready"
        assert service.get("/healthz").status_code == 200  # not dead: no restart
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: service.answers("/readyz", 200), "/readyz after SIGCONT")
    assert service.postmaster_pid() == pid
    assert service.restarts("restarted") == 0


def test_a_killed_service_leaves_no_postgres_after_the_next_clean_stop(
    start_service: Start, data_dir: Path
) -> None:
    first = start_service(data_dir)
    postmaster = first.postmaster_pid()
    first.process.kill()  # SIGKILL: no clean-up at all
    assert _alive(postmaster)  # the database outlives it

    second = start_service(data_dir)
    assert second.postmaster_pid() == postmaster  # adopted, not started twice
    backends = [p.pid for p in psutil.Process(postmaster).children()]
    assert second.process.terminate() == 0, second.process.output()

    assert not _alive(postmaster)
    assert not [pid for pid in backends if _alive(pid)]
    assert not (data_dir / "pg" / "postmaster.pid").exists()


def test_restart_backoff_doubles_up_to_its_maximum() -> None:
    delays = [restart_delay(n) for n in range(1, 10)]
    assert delays[:4] == [0.5, 1.0, 2.0, 4.0]
    assert delays[-1] == BACKOFF_MAX_SECONDS
    assert all(a <= b for a, b in itertools.pairwise(delays))
