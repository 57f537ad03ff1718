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

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    and_,
    column,
    exists,
    func,
    literal,
    select,
    table,
)

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


# PostgreSQL's views of locks and sessions, as far as the marker locks read them.
_PG_LOCKS = table(
    "pg_locks",
    column("locktype"),
    column("classid"),
    column("objid"),
    column("objsubid"),
    column("granted"),
    column("pid"),
)
_PG_STAT_ACTIVITY = table("pg_stat_activity", column("pid"), column("application_name"))


def _marker_lock(key: int) -> ColumnElement[bool]:
    """The granted advisory lock on the table's marker key (the two-key form: `objsubid` 2)."""
    locks = _PG_LOCKS.c
    return and_(
        locks.locktype == "advisory",
        locks.classid == MARKER_LOCK_CLASS,
        locks.objid == key,
        locks.objsubid == 2,
        locks.granted.is_(True),
    )


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
        connection.execute(select(func.set_config("application_name", address, False)))
    except Exception:
        connection.invalidate()
        connection.close()
        raise
    return connection


def try_own(connection: Connection, key: int) -> bool:
    """Take the table's marker lock on the owner connection without waiting (True again
    when this connection holds it already)."""
    held = connection.scalar(
        select(exists().where(_marker_lock(key), _PG_LOCKS.c.pid == func.pg_backend_pid()))
    )
    if held:
        return True
    return bool(connection.scalar(select(func.pg_try_advisory_lock(MARKER_LOCK_CLASS, key))))


def owner_address(connection: Connection, key: int) -> str | None:
    """The address the table's owner advertises; None while no instance owns it."""
    address = connection.scalar(
        select(_PG_STAT_ACTIVITY.c.application_name)
        .join_from(_PG_LOCKS, _PG_STAT_ACTIVITY, _PG_STAT_ACTIVITY.c.pid == _PG_LOCKS.c.pid)
        .where(_marker_lock(key))
        .limit(1)
    )
    return str(address) if address else None


def is_alive(connection: Connection) -> bool:
    """Whether the owner connection still answers (its locks are gone when it does not)."""
    try:
        connection.scalar(select(literal(1)))
    except Exception:
        return False
    return True
