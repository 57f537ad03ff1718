"""PostgreSQL advisory locks on tables (`hoodie.write.lock.provider=postgres`), for tables
only `tms` services.

A session-level advisory lock belongs to the connection that took it, so each lock held is
a connection of its own, kept open while it is held: closing the connection (the holder's
process dying, or the database restarting) frees it. The service's threads take and release
locks (`try_take`, `release`: `tms.hudi.locks.AdvisoryLocks`, whose `hold_advisory` waits for
them as for a lock file); a job, which has no database access, asks the service through the
job API and the service holds the lock for the job's attempt (`take_for`, `release_for`)
until the job releases it or its attempt loses its lease (`sweep`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from sqlalchemy import BigInteger, Connection, Engine, func, literal, select
from sqlalchemy.orm import Session

from tms.store.leases import holds_lease
from tms.store.models import Attempt, Operation

__all__ = ["TableLocks"]

log = logging.getLogger(__name__)


@dataclass
class _JobLock:
    key: int
    connection: Connection


class TableLocks:
    """Advisory locks on one database, held on connections of their own."""

    def __init__(self, engine: Engine, *, retry_seconds: float = 0.2) -> None:
        self._engine = engine
        self.retry_seconds = retry_seconds
        """How often a waiting holder tries again (`tms.hudi.locks.hold_advisory`)."""
        self._mutex = threading.Lock()
        self._jobs: dict[int, _JobLock] = {}
        self._held: dict[int, Connection] = {}

    def try_take(self, key: int) -> bool:
        """Take `key` for this service now: True when it holds it (on a connection of its
        own until `release`), False while another holder has it."""
        connection = self._try(key)
        if connection is None:
            return False
        with self._mutex:
            self._held[key] = connection
        return True

    def release(self, key: int) -> None:
        """Release `key`, which this service took with `try_take`."""
        with self._mutex:
            connection = self._held.pop(key)
        self._unlock(connection, key)

    def take_for(self, attempt_id: int, key: int) -> bool:
        """Take `key` for a job's attempt without waiting: True when the attempt holds it
        (again: taking twice is idempotent), False while another holder has it."""
        with self._mutex:
            held = self._jobs.get(attempt_id)
            if held is not None:
                return held.key == key
        connection = self._try(key)
        if connection is None:
            return False
        with self._mutex:
            self._jobs[attempt_id] = _JobLock(key, connection)
        return True

    def release_for(self, attempt_id: int) -> bool:
        """Release what the attempt holds: True when it held a lock."""
        with self._mutex:
            held = self._jobs.pop(attempt_id, None)
        if held is None:
            return False
        self._unlock(held.connection, held.key)
        return True

    def held_for(self) -> list[int]:
        """The attempts holding a lock here."""
        with self._mutex:
            return sorted(self._jobs)

    def sweep(self, session: Session) -> list[int]:
        """Release the locks of attempts that no longer hold their lease (they finished,
        or were reaped): their jobs must not go on under the lock. Returns their ids."""
        ids = self.held_for()
        if not ids:
            return []
        rows = session.execute(
            select(Attempt, Operation)
            .join(Operation, Operation.id == Attempt.operation_id)
            .where(Attempt.id.in_(ids))
        ).all()
        live = {attempt.id for attempt, operation in rows if holds_lease(attempt, operation)}
        gone = [attempt_id for attempt_id in ids if attempt_id not in live]
        for attempt_id in gone:
            if self.release_for(attempt_id):
                log.warning("released the table lock of attempt %s: it lost its lease", attempt_id)
        return gone

    def close(self) -> None:
        """Release every lock held for jobs (the service is stopping)."""
        for attempt_id in self.held_for():
            self.release_for(attempt_id)

    def _try(self, key: int) -> Connection | None:
        connection = self._engine.connect()
        try:
            connection.execution_options(isolation_level="AUTOCOMMIT")
            taken = connection.scalar(select(func.pg_try_advisory_lock(literal(key, BigInteger))))
        except Exception:
            connection.close()
            raise
        if taken:
            return connection
        connection.close()
        return None

    def _unlock(self, connection: Connection, key: int) -> None:
        try:
            connection.scalar(select(func.pg_advisory_unlock(literal(key, BigInteger))))
        except Exception:
            log.warning("unlocking advisory lock %s failed; closing its connection", key)
            connection.invalidate()  # the server frees a closed session's locks
        finally:
            connection.close()
