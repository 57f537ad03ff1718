"""The service process: database (embedded or external), migrations, API and scheduler.

`serve` runs it in the foreground (`tms serve`: SIGTERM and SIGINT shut it down cleanly,
exit 0); `serve_in_thread` runs the same assembly in a background thread for `tms demo`
and tests. Both bind the listening socket first, so a busy port fails before anything
else starts, and the URL jobs use to reach the API is known before the scheduler starts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from tms.api.app import create_app
from tms.api.http_protocol import JsonErrorsHttpToolsProtocol
from tms.config import Settings
from tms.embedded_postgres import EmbeddedSupervisor, start_embedded
from tms.scheduler import create_scheduler, start_scheduler
from tms.serve_workers import WorkerProcesses
from tms.store import head_revision, make_engine, make_session_factory, upgrade

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from tms.embedded_postgres import EmbeddedPostgres, EmbeddedSupervisor

__all__ = [
    "Database",
    "RunningService",
    "ServiceStartError",
    "bind_socket",
    "build_app",
    "free_port",
    "migrate",
    "open_database",
    "serve",
    "serve_in_thread",
]

log = logging.getLogger(__name__)

SCHEDULER_JOIN_SECONDS = 30.0
Lifespan = Callable[["FastAPI"], AbstractAsyncContextManager[None]]


class ServiceStartError(RuntimeError):
    """The service could not start; the message says what failed."""


@dataclass
class Database:
    """The service's database: its URL, engine and sessions, and the embedded server if the
    service runs one (watched by `supervisor`, stopped by `close`)."""

    url: str
    engine: Engine
    factory: sessionmaker[Session]
    embedded: EmbeddedPostgres | None = None
    supervisor: EmbeddedSupervisor | None = None
    _closed: bool = field(default=False, repr=False)

    @property
    def kind(self) -> str:
        """For the start-up log: which server, never the password."""
        if self.embedded is not None:
            return f"embedded PostgreSQL under {self.embedded.pgdata}"
        return f"PostgreSQL {make_url(self.url).render_as_string(hide_password=True)}"

    def close(self) -> None:
        """Dispose of the pool and stop the embedded server; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self.supervisor is not None:
            self.supervisor.stop()  # first: it would restart the server stopped below
        self.engine.dispose()
        if self.embedded is not None:
            self.embedded.stop()


def _database_url(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    if settings.database_url is not None:
        return settings.database_url, None
    embedded = start_embedded(settings.data_dir)
    return embedded.url(), embedded


def migrate(settings: Settings) -> str:
    """`tms db upgrade`: apply the migrations (starting the embedded server if the settings
    name no database, and stopping it after); returns the database's description."""
    url, embedded = _database_url(settings)
    try:
        upgrade(url, connect_timeout=settings.db_connect_timeout_seconds)
    finally:
        if embedded is not None:
            embedded.stop()
    if embedded is not None:
        return f"embedded PostgreSQL under {embedded.pgdata}"
    return make_url(url).render_as_string(hide_password=True)


def open_database(settings: Settings) -> Database:
    """Start the embedded server when there is no `database_url`, bring the schema to the
    migrations' head (every start: a new version's instances migrate before serving; an
    advisory lock serialises instances starting together), open the pool, and watch the
    embedded server (restarted if it dies)."""
    url, embedded = _database_url(settings)
    try:
        upgrade(url, connect_timeout=settings.db_connect_timeout_seconds)
        engine = make_engine(
            url,
            pool_size=settings.db_pool_size,
            connect_timeout=settings.db_connect_timeout_seconds,
            statement_timeout=settings.db_statement_timeout_seconds,
            pool_timeout=settings.db_pool_timeout_seconds,
        )
    except BaseException:
        if embedded is not None:
            embedded.stop()
        raise
    supervisor = None
    if embedded is not None:
        # Connections to a server that died are dead: a restart drops the whole pool.
        supervisor = EmbeddedSupervisor(embedded, on_restart=engine.dispose)
        supervisor.start()
    database = Database(url, engine, make_session_factory(engine), embedded, supervisor)
    log.info("database: %s, migrated to %s", database.kind, head_revision())
    return database


def scheduler_lifespan(settings: Settings, database: Database) -> Lifespan:
    """Run the scheduler thread while the app serves (none when `max_running_per_instance`
    is 0: an API-only instance); stop it, then the database, when the app shuts down."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop = threading.Event()
        thread: threading.Thread | None = None
        if settings.max_running_per_instance > 0:
            scheduler = await asyncio.to_thread(
                partial(
                    create_scheduler,
                    settings,
                    database.factory,
                    table_locks=app.state.table_locks,
                )
            )
            thread = start_scheduler(scheduler, stop)
            log.info(
                "scheduler %s: up to %d job(s) at once on Spark %s",
                scheduler.instance_id,
                settings.max_running_per_instance,
                settings.spark_master,
            )
        else:
            log.info("max_running_per_instance is 0: API only, no scheduler")
        workers = WorkerProcesses(settings)
        app.state.worker_processes = workers
        if settings.workers > 0:
            workers.start()
        try:
            yield
        finally:
            await asyncio.to_thread(workers.stop)
            stop.set()
            if thread is not None:
                await asyncio.to_thread(thread.join, SCHEDULER_JOIN_SECONDS)
            app.state.table_locks.close()
            app.state.markers.close()  # frees its tables' markers for another instance now
            database.close()

    return lifespan


def build_app(settings: Settings, database: Database) -> FastAPI:
    """The API with the scheduler in its lifespan."""
    app = create_app(settings, database.factory, lifespan=scheduler_lifespan(settings, database))
    app.state.database_supervisor = database.supervisor  # /healthz and /readyz report it
    return app


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready socket on `host:port` (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ServiceStartError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return sock


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (for the demo and tests)."""
    with bind_socket(host, 0) as sock:
        port: int = sock.getsockname()[1]
        return port


def _server(
    app: FastAPI, settings: Settings, *, log_level: str, access_log: bool
) -> uvicorn.Server:
    import uvicorn

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=JsonErrorsHttpToolsProtocol,  # malformed requests get the API's JSON error too
        log_config=None,  # our logging set-up (or the caller's) applies to uvicorn's loggers
        log_level=log_level,
        access_log=access_log,
        lifespan="on",
    )
    return uvicorn.Server(config)


def _describe(settings: Settings, database: Database) -> str:
    auth = "on" if settings.auth_enabled else "OFF"
    timeline = (
        f"; timeline server on port {settings.timeline_server_port}"
        if settings.timeline_server_port is not None
        else ""
    )
    return f"tms at {settings.api_url} ({database.kind}; auth {auth}{timeline})"


class _StopBeforeServing(Exception):
    """SIGTERM/SIGINT arrived while the service was still starting."""


class _Signals:
    """SIGTERM and SIGINT for `serve`. Before uvicorn runs, a signal unwinds the start-up
    (so the embedded database that was just started is stopped again). While it runs,
    uvicorn's own handlers turn a signal into a graceful shutdown and afterwards raise it
    again with the handler installed before theirs, ours: it ignores that second delivery,
    so a clean shutdown exits 0 instead of dying by the signal."""

    def __init__(self) -> None:
        self.server: uvicorn.Server | None = None
        self._previous: dict[signal.Signals, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.server is None:
            raise _StopBeforeServing(name)
        # Also covers a signal in the instant before uvicorn installs its handlers.
        self.server.should_exit = True
        log.info("shut down after %s", name)

    def __enter__(self) -> _Signals:
        self._previous = {
            s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)
        }
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def serve(settings: Settings, *, log_level: str = "info", access_log: bool = False) -> None:
    """`tms serve`: run until SIGTERM or SIGINT, then stop the scheduler (running jobs keep
    their leases) and the embedded database, and return."""
    sockets = bind_sockets(settings)
    try:
        with _Signals() as signals:
            _serve(settings, sockets, signals, log_level=log_level, access_log=access_log)
    except _StopBeforeServing as stop:
        log.info("stopped by %s during start-up", stop)
    finally:
        for sock in sockets:
            sock.close()
    log.info("tms stopped")


def bind_sockets(settings: Settings) -> list[socket.socket]:
    """The API's socket, and the timeline server's when it has a port of its own."""
    sockets = [bind_socket(settings.host, settings.port)]
    if settings.timeline_server_port is not None:
        try:
            sockets.append(bind_socket(settings.host, settings.timeline_server_port))
        except BaseException:
            sockets[0].close()
            raise
    return sockets


def _serve(
    settings: Settings,
    sockets: list[socket.socket],
    signals: _Signals,
    *,
    log_level: str,
    access_log: bool,
) -> None:
    os.environ.update(settings.storage_retry_environment())
    database = open_database(settings)
    try:
        app = build_app(settings, database)
        server = _server(app, settings, log_level=log_level, access_log=access_log)
        app.state.server = server  # long polls end early once it is shutting down
        log.info("starting %s", _describe(settings, database))
        signals.server = server
        server.run(sockets=sockets)
        if not server.started:
            raise ServiceStartError("the server did not start (see the log above)")
    finally:
        database.close()


@dataclass
class RunningService:
    """A service running in a background thread of this process."""

    settings: Settings
    database: Database
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket

    @property
    def url(self) -> str:
        return self.settings.api_url

    @property
    def worker_processes(self) -> WorkerProcesses | None:
        """The resident workers this service started (`TMS_WORKERS`), once it serves."""
        state = getattr(self.server.config.app, "state", None)
        workers = getattr(state, "worker_processes", None)
        return workers if isinstance(workers, WorkerProcesses) else None

    def stop(self, timeout: float = 60.0) -> None:
        """Graceful shutdown: stop serving, stop the scheduler, close the database."""
        self.server.should_exit = True
        self.thread.join(timeout)
        self.database.close()
        self.sock.close()

    def __enter__(self) -> RunningService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(
    settings: Settings, *, log_level: str = "warning", start_timeout: float = 120.0
) -> RunningService:
    """Start the service in a daemon thread and return once it serves requests."""
    sock = bind_socket(settings.host, settings.port)
    try:
        database = open_database(settings)
    except BaseException:
        sock.close()
        raise
    app = build_app(settings, database)
    server = _server(app, settings, log_level=log_level, access_log=False)
    app.state.server = server
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="tms-serve", daemon=True
    )
    thread.start()
    running = RunningService(settings, database, server, thread, sock)
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            running.stop(timeout=5)
            raise ServiceStartError(f"{_describe(settings, database)} did not start")
        time.sleep(0.02)
    log.info("started %s", _describe(settings, database))
    return running
