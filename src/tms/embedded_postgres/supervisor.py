"""Keeps the embedded PostgreSQL of `tms serve` running.

A thread polls the postmaster; when it has died (SIGKILL, OOM killer) it starts it again
on the same directory, socket and port, retrying with exponential backoff while that
fails, and then drops the engine's pooled connections (they belonged to the dead server).
It never gives up: while the server cannot be restarted the status is unhealthy, so
`/healthz` fails and an orchestrator restarts the whole service.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tms import metrics
from tms.embedded_postgres.server import EmbeddedPostgres

__all__ = [
    "BACKOFF_BASE_SECONDS",
    "BACKOFF_MAX_SECONDS",
    "POLL_SECONDS",
    "DatabaseState",
    "EmbeddedSupervisor",
    "SupervisorStatus",
    "restart_delay",
]

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
"""How often the postmaster is checked (a process lookup, no database round trip)."""
BACKOFF_BASE_SECONDS = 0.5
"""Wait after the first failed restart; doubled after each further failure."""
BACKOFF_MAX_SECONDS = 30.0
"""Longest wait between two restart attempts."""
JOIN_SECONDS = 60.0


class DatabaseState(enum.StrEnum):
    RUNNING = "running"
    RESTARTING = "restarting"
    """The server died; a restart is under way."""
    FAILED = "failed"
    """The last restart failed; the next one waits for its backoff."""


@dataclass(frozen=True)
class SupervisorStatus:
    state: DatabaseState
    reason: str | None
    restarts: int
    """Restarts that succeeded since the service started."""
    failures: int
    """Failed restart attempts in a row (0 once one succeeds)."""
    watching: bool
    """False when the supervisor thread is not running (stopped, or died of a bug)."""

    @property
    def healthy(self) -> bool:
        """The service can work: the server runs or is being restarted, and is watched."""
        return self.watching and self.state is not DatabaseState.FAILED

    @property
    def ready(self) -> bool:
        return self.state is DatabaseState.RUNNING


def restart_delay(failures: int) -> float:
    """Wait before the next attempt after `failures` failed ones in a row."""
    return min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2.0 ** max(0, failures - 1))


class EmbeddedSupervisor:
    """Watches `embedded` from a daemon thread; `on_restart` runs after each restart (the
    service disposes of its connection pool there)."""

    def __init__(
        self,
        embedded: EmbeddedPostgres,
        *,
        on_restart: Callable[[], None],
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self._embedded = embedded
        self._on_restart = on_restart
        self._poll = poll_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._state = DatabaseState.RUNNING
        self._reason: str | None = None
        self._restarts = 0
        self._failures = 0

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="tms-embedded-db-supervisor", daemon=True
        )
        self._thread.start()
        log.info("watching embedded PostgreSQL under %s", self._embedded.pgdata)

    def stop(self) -> None:
        """Stop watching (before the server is stopped on purpose); waits for a restart
        under way to finish."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_SECONDS)

    def status(self) -> SupervisorStatus:
        watching = self._thread is not None and self._thread.is_alive()
        with self._lock:
            return SupervisorStatus(
                self._state, self._reason, self._restarts, self._failures, watching
            )

    def _set(self, state: DatabaseState, reason: str | None) -> None:
        with self._lock:
            self._state, self._reason = state, reason

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                if not self._embedded.is_running():
                    self._recover()
            except Exception:  # a bug here must not end the watch silently
                log.exception("embedded PostgreSQL supervisor: unexpected error")

    def _recover(self) -> None:
        """Restart until it works or the service stops."""
        pgdata = self._embedded.pgdata
        self._set(DatabaseState.RESTARTING, "the embedded database died; restarting it")
        log.error("embedded PostgreSQL under %s is not running; restarting it", pgdata)
        failures = 0
        while not self._stop.is_set():
            try:
                started = self._embedded.restart()
            except Exception as exc:
                failures += 1
                delay = restart_delay(failures)
                metrics.EMBEDDED_DB_RESTARTS.labels("failed").inc()
                log.error(
                    "restart %d of embedded PostgreSQL under %s failed: %s; next try in %gs",
                    failures,
                    pgdata,
                    exc,
                    delay,
                )
                with self._lock:
                    self._failures = failures
                    self._state = DatabaseState.FAILED
                    self._reason = (
                        f"the embedded database died and {failures} restart(s) failed "
                        f"(server log: {pgdata / 'log'})"
                    )
                if self._stop.wait(delay):
                    return
                continue
            self._on_restart()
            metrics.EMBEDDED_DB_RESTARTS.labels("restarted").inc()
            with self._lock:
                self._restarts += 1
                self._failures = 0
                self._state, self._reason = DatabaseState.RUNNING, None
            how = "restarted" if started else "found running again"
            log.warning(
                "embedded PostgreSQL under %s %s (pid %s) after %d failed attempt(s)",
                pgdata,
                how,
                self._embedded.pid,
                failures,
            )
            return
