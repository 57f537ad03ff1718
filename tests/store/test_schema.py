"""The migrations and the models describe the same schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from tests.db_fixtures import PgServer, _unique
from tms.store import Base, alembic_config, current_revision, head_revision, is_up_to_date, upgrade

CATALOG = {
    "columns": """
        SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default,
               is_identity, identity_generation
        FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name <> 'alembic_version'
        ORDER BY 1, 2""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = 'public' AND tablename <> 'alembic_version' ORDER BY 1, 2""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
        WHERE connamespace = 'public'::regnamespace
          AND conrelid::regclass::text <> 'alembic_version'
        ORDER BY 1, 2""",
    "enums": """
        SELECT t.typname, array_agg(e.enumlabel ORDER BY e.enumsortorder)
        FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY 1 ORDER BY 1""",
}


def _catalog(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        return {k: [tuple(r) for r in conn.execute(text(q))] for k, q in CATALOG.items()}


@pytest.fixture
def models_engine(pg_server: PgServer) -> Iterator[Engine]:
    """An empty database given the schema by `Base.metadata.create_all`."""
    name = _unique("tms_test_models")
    pg_server.create_database(name)
    engine = create_engine(pg_server.url(name), poolclass=NullPool)
    try:
        Base.metadata.create_all(engine)
        yield engine
    finally:
        engine.dispose()
        pg_server.drop_database(name)


def test_autogenerate_finds_no_difference(engine: Engine) -> None:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"compare_type": True, "compare_server_default": True}
        )
        assert compare_metadata(context, Base.metadata) == []


def test_catalogs_are_identical(engine: Engine, models_engine: Engine) -> None:
    """Catches what autogenerate does not compare: partial index predicates, checks, enums."""
    migrated, modelled = _catalog(engine), _catalog(models_engine)
    for part in CATALOG:
        assert migrated[part] == modelled[part], part
    assert len(migrated["indexes"]) >= 14


def test_revision_checks_and_downgrade_round_trip(engine: Engine, db_url: str) -> None:
    assert current_revision(engine) == head_revision() == "0018"
    assert is_up_to_date(engine)
    engine.dispose()
    with engine.connect() as conn:
        config = alembic_config(db_url)
        config.attributes["connection"] = conn
        command.downgrade(config, "base")
        conn.commit()
    assert current_revision(engine) is None
    assert not is_up_to_date(engine)
    upgrade(db_url)
    upgrade(db_url)  # already at head: nothing to do
    assert is_up_to_date(engine)
