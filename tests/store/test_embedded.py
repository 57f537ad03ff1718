"""The embedded PostgreSQL of the default set-up: starts, creates the database, migrates."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import psycopg

from tms.embedded_postgres import start_embedded
from tms.embedded_postgres.orphans import find_orphans
from tms.store import (
    ServiceAction,
    is_up_to_date,
    make_engine,
    make_session_factory,
    register_table,
    session_scope,
    submit_operation,
    upgrade,
)


def test_embedded_server_starts_creates_database_and_migrates(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with start_embedded(data_dir, cleanup="delete") as pg:
        assert (data_dir / "pg" / "PG_VERSION").is_file()
        url = pg.url()
        assert url.startswith("postgresql+psycopg://postgres@") and "/tms?" in url
        upgrade(url)
        engine = make_engine(url, pool_size=1)
        try:
            assert is_up_to_date(engine)
            with session_scope(make_session_factory(engine)) as session:
                table = register_table(
                    session, db_name="db", table_name="t", base_path="/data/t"
                ).table
                submit_operation(session, tbl_id=table.id, action=ServiceAction.CLEAN)
            # A second start on the same directory joins the running server.
            assert start_embedded(data_dir).url() == url
        finally:
            engine.dispose()


def test_a_killed_server_is_restarted_on_the_same_socket_with_its_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with start_embedded(data_dir, cleanup="delete") as pg:
        url = pg.url()
        with psycopg.connect(pg.libpq_url(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (v int)")
            conn.execute("INSERT INTO kept VALUES (7)")
        killed = pg.pid
        assert killed is not None and pg.is_running()
        assert pg.restart() is False  # running: nothing to do

        os.kill(killed, signal.SIGKILL)
        wait_until(lambda: not pg.is_running())
        assert pg.restart() is True
        assert pg.is_running() and pg.pid != killed
        assert pg.url() == url  # same socket and port: the service's engine stays valid
        with psycopg.connect(pg.libpq_url(), autocommit=True) as conn:
            assert conn.execute("SELECT v FROM kept").fetchall() == [(7,)]


def test_a_restart_ends_the_backends_its_dead_postmaster_left_and_no_others(
    tmp_path: Path,
) -> None:
    with (
        start_embedded(tmp_path / "a", cleanup="delete") as pg,
        start_embedded(tmp_path / "b", cleanup="delete") as other,
        psycopg.connect(pg.libpq_url(), autocommit=True) as conn,
        psycopg.connect(other.libpq_url(), autocommit=True) as other_conn,
    ):
        conn.execute("CREATE TABLE kept (v int)")
        # A stopped backend outlives its postmaster (it cannot notice the death).
        orphan, bystander = conn.info.backend_pid, other_conn.info.backend_pid
        os.kill(orphan, signal.SIGSTOP)
        os.kill(bystander, signal.SIGSTOP)  # the same, in another server that still runs
        try:
            assert pg.pid is not None and other.pid is not None
            other_processes = {other.pid, *(p.pid for p in psutil.Process(other.pid).children())}
            assert bystander in other_processes
            assert find_orphans(other.pgdata) == []  # its postmaster lives

            os.kill(pg.pid, signal.SIGKILL)
            wait_until(lambda: not pg.is_running())
            found = {p.pid for p in find_orphans(pg.pgdata)}
            assert orphan in found
            assert not found & other_processes

            assert pg.restart() is True  # at once: the orphan is ended first
            assert not psutil.pid_exists(orphan) or (
                psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
            )
            with psycopg.connect(pg.libpq_url(), autocommit=True) as after:
                assert after.execute("SELECT count(*) FROM kept").fetchone() == (0,)
            assert psutil.Process(bystander).status() == psutil.STATUS_STOPPED
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(orphan, signal.SIGKILL)
            os.kill(bystander, signal.SIGCONT)
        assert other_conn.execute("SELECT 1").fetchone() == (1,)  # untouched, still serves


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g}s"
        time.sleep(0.05)
