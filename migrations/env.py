"""Alembic environment: run migrations on a given connection, a URL, or the service's own.

Order of precedence for the database: a connection passed in by `tms.store.db.upgrade`,
`sqlalchemy.url` in the config, then the service settings (`TMS_DATABASE_URL`, else the
embedded PostgreSQL under `TMS_DATA_DIR`, started for the duration of the command).
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.pool import NullPool

from tms.store.db import MIGRATION_LOCK_KEY
from tms.store.models import Base

config = context.config
if config.config_file_name is not None:  # the alembic CLI, not tms.store.db.upgrade
    fileConfig(config.config_file_name, disable_existing_loggers=False)
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from tms.config import get_settings

    settings = get_settings()
    if settings.database_url is not None:
        return settings.database_url
    from tms.store.embedded import start_embedded

    return start_embedded(settings.data_dir).url()


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        # Held to the end of the migration transaction: concurrent upgrades run one by one,
        # and the second finds the schema already at head.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        context.run_migrations()


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(_url(), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
