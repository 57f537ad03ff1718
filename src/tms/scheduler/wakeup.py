"""A scheduler's wait between ticks: the interval, or less when an operation becomes due.

It LISTENs for due operations (`tms.store.listen_for_due`) over a connection of its own.
Without one (the database is down, or the listen failed) it just sleeps: polling is always
the fallback.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy import Engine

from tms.store import listen_for_due

log = logging.getLogger(__name__)


class Wakeup:
    def __init__(self, engine: Engine | None) -> None:
        self._engine = engine
        self._connection: Any = None

    def wait(self, seconds: float, stop_event: threading.Event) -> bool:
        """Wait up to `seconds`; True when woken by a notification."""
        if seconds <= 0 or stop_event.is_set():
            return False
        listener = self._listener()
        if listener is None:
            stop_event.wait(seconds)
            return False
        try:
            # Short slices, so a stop request is noticed within a quarter second.
            remaining = seconds
            while remaining > 0 and not stop_event.is_set():
                step = min(remaining, 0.25)
                if any(True for _ in listener.notifies(timeout=step, stop_after=1)):
                    self._drain(listener)
                    return True
                remaining -= step
        except Exception:
            log.warning("scheduler wake-up listener failed; polling only until it reconnects")
            self.close()
        return False

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except Exception:
                log.debug("closing the wake-up listener failed", exc_info=True)
            self._connection = None

    def _listener(self) -> Any:
        if self._connection is not None:
            return self._connection.connection.driver_connection
        if self._engine is None or self._engine.dialect.name != "postgresql":
            return None
        try:
            connection = listen_for_due(self._engine)
        except Exception:
            log.warning("cannot LISTEN for scheduler wake-ups; polling only", exc_info=True)
            return None
        self._connection = connection
        return connection.connection.driver_connection

    @staticmethod
    def _drain(listener: Any) -> None:
        """Several notifications may have queued up; one tick serves them all."""
        for _ in listener.notifies(timeout=0):
            pass
