"""Waking schedulers early: a new due operation sends a PostgreSQL notification on commit.

Polling stays the fallback (a notification sent while no scheduler listens is lost); the
notification only cuts the wait from up to a scheduler interval to a round trip.
"""

from __future__ import annotations

from psycopg import sql
from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.orm import Session

CHANNEL = "tms_operations_due"


def notify_due(session: Session) -> None:
    """Tell listening schedulers that an operation became due; delivered at commit."""
    session.execute(select(func.pg_notify(CHANNEL, "")))


def listen_for_due(engine: Engine) -> Connection:
    """A connection of its own (autocommit) that LISTENs on `CHANNEL`; the caller closes it."""
    connection = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    try:
        # LISTEN has no SQLAlchemy construct; psycopg quotes the channel as an identifier.
        listen = sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL))
        connection.exec_driver_sql(listen.as_string(connection.connection.driver_connection))
    except Exception:
        connection.close()
        raise
    return connection
