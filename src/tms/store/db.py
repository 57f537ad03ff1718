"""Engines, sessions and migrations.

Alembic is the only way the schema changes; `upgrade` runs it in-process (serve, CLI,
tests). Sessions are plain `Session`s whose transactions belong to the caller:
repository functions never commit.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

__all__ = [
    "alembic_config",
    "current_revision",
    "head_revision",
    "is_up_to_date",
    "make_engine",
    "make_session_factory",
    "migrations_dir",
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


def make_engine(url: str, *, pool_size: int = 10, echo: bool = False) -> Engine:
    """An engine for `url`. No `pool_pre_ping` (a round trip on every checkout): connections
    are recycled after `POOL_RECYCLE_SECONDS`, and one found dead (database restart) is
    invalidated by SQLAlchemy, with the whole pool, so only requests in flight then fail."""
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        pool_recycle=POOL_RECYCLE_SECONDS,
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


def upgrade(url: str, revision: str = "head") -> None:
    """Apply migrations up to `revision`; safe to run from several processes at once (an
    advisory lock in migrations/env.py serialises them)."""
    engine = create_engine(url, poolclass=NullPool)
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
