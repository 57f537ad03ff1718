"""Which instance serves a table's timeline-server markers.

Marker state lives in the memory of one instance per table (batched writes, early conflict
detection on what is not yet on storage), so instances behind one address agree on an
owner: the holder of a session-level advisory lock on the table (two-key form,
`MARKER_LOCK_CLASS` and the table's key). The owner holds all its tables' locks on one
connection of its own, whose `application_name` is the owner's address: the others read it
from `pg_stat_activity` to forward requests there. Closing that connection (the owner
stopping or dying, the database restarting) frees every lock it held.
"""

from __future__ import annotations

import zlib

from sqlalchemy import Connection, Engine, text

__all__ = [
    "ADDRESS_MAX_BYTES",
    "MARKER_LOCK_CLASS",
    "is_alive",
    "marker_key",
    "open_owner_connection",
    "owner_address",
    "try_own",
]

MARKER_LOCK_CLASS = 0x746D6B  # "tmk"; the table locks use the one-key form
ADDRESS_MAX_BYTES = 63
"""PostgreSQL keeps at most this much of an `application_name` (NAMEDATALEN - 1)."""


def marker_key(base_path: str) -> int:
    """The table's lock key, from its normalized base path (non-negative, so `pg_locks`
    shows it as is)."""
    return zlib.crc32(base_path.encode("utf-8")) & 0x7FFFFFFF


def open_owner_connection(engine: Engine, address: str) -> Connection:
    """A connection, in autocommit, that advertises `address` as its application name.
    The caller invalidates it when done (`Connection.invalidate`): back in the pool it would
    keep its locks and its name."""
    connection = engine.connect()
    try:
        connection.execution_options(isolation_level="AUTOCOMMIT")
        connection.execute(
            text("SELECT set_config('application_name', :address, false)"), {"address": address}
        )
    except Exception:
        connection.invalidate()
        connection.close()
        raise
    return connection


def try_own(connection: Connection, key: int) -> bool:
    """Take the table's marker lock on the owner connection without waiting (True again
    when this connection holds it already)."""
    held = connection.scalar(
        text(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
            "AND classid = :cls AND objid = :key AND objsubid = 2 AND granted "
            "AND pid = pg_backend_pid())"
        ),
        {"cls": MARKER_LOCK_CLASS, "key": key},
    )
    if held:
        return True
    return bool(
        connection.scalar(
            text("SELECT pg_try_advisory_lock(:cls, :key)"), {"cls": MARKER_LOCK_CLASS, "key": key}
        )
    )


def owner_address(connection: Connection, key: int) -> str | None:
    """The address the table's owner advertises; None while no instance owns it."""
    address = connection.scalar(
        text(
            "SELECT a.application_name FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND l.classid = :cls AND l.objid = :key "
            "AND l.objsubid = 2 AND l.granted LIMIT 1"
        ),
        {"cls": MARKER_LOCK_CLASS, "key": key},
    )
    return str(address) if address else None


def is_alive(connection: Connection) -> bool:
    """Whether the owner connection still answers (its locks are gone when it does not)."""
    try:
        connection.scalar(text("SELECT 1"))
    except Exception:
        return False
    return True
