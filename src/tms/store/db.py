"""Engines, sessions and migrations.

Alembic is the only way the schema changes; `upgrade` runs it in-process (serve, CLI,
tests). Sessions are plain `Session`s whose transactions belong to the caller:
repository functions never commit.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from psycopg import sql
from sqlalchemy import Engine, create_engine, literal, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

__all__ = [
    "alembic_config",
    "check_ready",
    "connect_args",
    "create_database",
    "current_revision",
    "head_revision",
    "is_up_to_date",
    "make_engine",
    "make_session_factory",
    "migrations_dir",
    "probe_engine",
    "session_scope",
    "upgrade",
]

# Alembic's `context` is process-global: in-process upgrades must not overlap.
_UPGRADE_LOCK = threading.Lock()


def migrations_dir() -> Path:
    """`TMS_MIGRATIONS_DIR`, else the checkout's top-level `migrations/` (src layout,
    editable install), else `./migrations` (an image that copies it next to its cwd)."""
    named = os.environ.get("TMS_MIGRATIONS_DIR")
    if named:
        return Path(named)
    checkout = Path(__file__).resolve().parents[3] / "migrations"
    if (checkout / "env.py").is_file():
        return checkout
    return Path.cwd() / "migrations"


# Serialises concurrent upgrades (several instances starting together); any constant works.
MIGRATION_LOCK_KEY = 0x746D735F6D696772  # "tms_migr"


# Connections older than this are replaced on checkout (no pre-ping round trip per checkout).
POOL_RECYCLE_SECONDS = 1800
DEFAULT_CONNECT_TIMEOUT_SECONDS = 5
DEFAULT_POOL_TIMEOUT_SECONDS = 30.0
"""SQLAlchemy's own; the service passes its settings (`db_*_timeout_seconds`) instead."""
LIBPQ_MIN_CONNECT_TIMEOUT = 2
"""libpq (and psycopg) treat a connect_timeout below 2 seconds as 2."""


def connect_args(
    url: str, *, connect_timeout: float, statement_timeout: float | None
) -> dict[str, Any]:
    """libpq parameters that bound every connection: `connect_timeout` (seconds) and the
    server-side `statement_timeout` (seconds; None or 0 = none), added to any `options`
    the URL already carries."""
    args: dict[str, Any] = {
        "connect_timeout": max(LIBPQ_MIN_CONNECT_TIMEOUT, math.ceil(connect_timeout))
    }
    if statement_timeout:
        given = make_url(url).query.get("options")
        options = given if isinstance(given, str) else " ".join(given or ())
        millis = max(1, round(statement_timeout * 1000))
        args["options"] = f"{options} -c statement_timeout={millis}".strip()
    return args


def make_engine(
    url: str,
    *,
    pool_size: int = 10,
    echo: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    statement_timeout: float | None = None,
    pool_timeout: float = DEFAULT_POOL_TIMEOUT_SECONDS,
) -> Engine:
    """An engine for `url` whose calls are bounded: a connection attempt by
    `connect_timeout`, a statement by `statement_timeout` (the server cancels it), a wait
    for a pooled connection by `pool_timeout`; each surfaces as an error, never a hang.
    Statements are unbounded unless asked (tools and benchmarks run long ones).

    No `pool_pre_ping` (a round trip on every checkout): connections are recycled after
    `POOL_RECYCLE_SECONDS`, and one found dead (database restart) is invalidated by
    SQLAlchemy, with the whole pool, so only requests in flight then fail. Whoever restarts
    the database disposes of the pool (`Engine.dispose`) too."""
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_recycle=POOL_RECYCLE_SECONDS,
        pool_timeout=pool_timeout,
        connect_args=connect_args(
            url, connect_timeout=connect_timeout, statement_timeout=statement_timeout
        ),
        echo=echo,
    )


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded rows usable after commit (API responses read them then)."""
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: commit on success, roll back on any exception."""
    with factory() as session, session.begin():
        yield session


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config for our migrations, independent of the current directory."""
    location = migrations_dir()
    if not (location / "env.py").is_file():
        raise FileNotFoundError(
            f"migrations not found at {location}; set TMS_MIGRATIONS_DIR to the "
            "checkout's migrations/ directory"
        )
    config = Config()
    config.set_main_option("script_location", str(location))
    if url is not None:
        # ConfigParser interpolation: a literal % in a password must be doubled.
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(
    url: str, revision: str = "head", *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
) -> None:
    """Apply migrations up to `revision`; safe to run from several processes at once (an
    advisory lock in migrations/env.py serialises them, so statements are not time-bounded:
    an instance waits for another's migration)."""
    args = connect_args(url, connect_timeout=connect_timeout, statement_timeout=None)
    engine = create_engine(url, poolclass=NullPool, connect_args=args)
    try:
        with _UPGRADE_LOCK, engine.connect() as connection:
            config = alembic_config(url)
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            connection.commit()
    finally:
        engine.dispose()


@cache
def head_revision() -> str:
    """The newest migration in `migrations/versions` (read once per process)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations in {migrations_dir()}")
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None before the first migration."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def is_up_to_date(engine: Engine) -> bool:
    """Readiness: the database answers and its schema is the code's head revision."""
    return current_revision(engine) == head_revision()


READY_CONNECT_TIMEOUT_SECONDS = LIBPQ_MIN_CONNECT_TIMEOUT
READY_STATEMENT_TIMEOUT_SECONDS = 1.0


def probe_engine(engine: Engine) -> Engine:
    """An engine for readiness checks on `engine`'s database: no pool (every check proves
    that a new connection can be made) and the shortest timeouts libpq allows, so a
    database that accepts connections but never answers does not hold a check for long."""
    url = engine.url.render_as_string(hide_password=False)
    return create_engine(
        url,
        poolclass=NullPool,
        connect_args=connect_args(
            url,
            connect_timeout=READY_CONNECT_TIMEOUT_SECONDS,
            statement_timeout=READY_STATEMENT_TIMEOUT_SECONDS,
        ),
    )


def check_ready(engine: Engine) -> str | None:
    """Readiness on one new connection: None when the database answers and its schema is
    the code's head revision, else why not (driver errors propagate to the caller)."""
    with engine.connect() as connection:
        connection.execute(select(literal(1)))
        current = MigrationContext.configure(connection).get_current_revision()
    head = head_revision()
    if current != head:
        return f"database at migration {current}, code expects {head}"
    return None


def create_database(admin_url: str, database: str) -> None:
    """Create `database` on the server `admin_url` (a libpq URL) unless it exists."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if exists:
            return
        # Another process may create it in the meantime; then it exists, as wanted. CREATE
        # DATABASE has no SQLAlchemy construct (and runs before any engine exists): psycopg
        # composes it, quoting the name as an identifier.
        with contextlib.suppress(psycopg.errors.DuplicateDatabase):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
