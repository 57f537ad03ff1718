"""Database fixtures for every test that needs PostgreSQL (real PostgreSQL, no mocks).

Which server: `TMS_TEST_DATABASE_URL` if set (its database is used only to create and drop
others), else an embedded server in a temporary directory, started for the run and removed
after it. A server that happens to listen on 127.0.0.1:5432 is never used unasked: the tests
create and drop databases, which belongs only on a server someone pointed them at. The choice
is printed once per run.

Schema: one template database is built per session by running the Alembic migrations; every
test gets its own `CREATE DATABASE … TEMPLATE` copy (tens of milliseconds), dropped after.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from tms.embedded_postgres import EmbeddedPostgres, start_embedded
from tms.store import make_engine, make_session_factory, upgrade


@dataclass
class PgServer:
    """A server the tests may create databases on."""

    kind: str
    admin_url: str  # SQLAlchemy URL of a maintenance database
    embedded: EmbeddedPostgres | None = field(default=None, repr=False)

    def url(self, database: str) -> str:
        return make_url(self.admin_url).set(database=database).render_as_string(False)

    def libpq_url(self, database: str | None = None) -> str:
        url = self.url(database) if database else self.admin_url
        return url.replace("postgresql+psycopg://", "postgresql://", 1)

    def execute(self, statement: sql.Composed) -> None:
        with psycopg.connect(self.libpq_url(), autocommit=True) as conn:
            conn.execute(statement)

    def create_database(self, name: str, template: str | None = None) -> None:
        if template is None:
            self.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        else:
            self.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )

    def drop_database(self, name: str) -> None:
        self.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _normalize(url: str) -> str:
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def _announce(config: pytest.Config, line: str) -> None:
    """Print past output capture, once, so every run says which server it used."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    if capture is None:
        reporter.write_line(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(f"\n{line}")


@pytest.fixture(scope="session")
def pg_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PgServer]:
    """The PostgreSQL server of this test run (see the module docstring)."""
    configured = os.environ.get("TMS_TEST_DATABASE_URL")
    if configured:
        server = PgServer("TMS_TEST_DATABASE_URL", _normalize(configured))
    else:
        embedded = start_embedded(tmp_path_factory.mktemp("pg"), cleanup="delete")
        server = PgServer("embedded server (temporary)", embedded.url("postgres"), embedded)
    _announce(request.config, f"store tests use PostgreSQL: {server.kind}")
    yield server
    if server.embedded is not None:
        server.embedded.stop()


@pytest.fixture(scope="session")
def template_db(pg_server: PgServer) -> Iterator[str]:
    """A database at the migrations' head, used as the template of every test database."""
    name = _unique("tms_test_tpl")
    pg_server.create_database(name)
    try:
        upgrade(pg_server.url(name))
        yield name
    finally:
        pg_server.drop_database(name)


@contextmanager
def database_at(pg_server: PgServer, revision: str, prefix: str) -> Iterator[str]:
    """A new database migrated up to `revision` only (what an older service left), for a
    migration's test to fill and upgrade; dropped after."""
    name = _unique(prefix)
    pg_server.create_database(name)
    try:
        upgrade(pg_server.url(name), revision)
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def db_url(pg_server: PgServer, template_db: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    name = _unique("tms_test")
    pg_server.create_database(name, template=template_db)
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url, pool_size=4)
    yield engine
    engine.dispose()


@pytest.fixture
def factory(engine: Engine) -> sessionmaker[Session]:
    return make_session_factory(engine)


@pytest.fixture
def session(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session whose transaction the test commits (or not) itself."""
    with factory() as session:
        yield session
