"""Background rounds: work the scheduler's tick starts and never waits on.

A cancel scan, a pull round and an alert round read storage or call a webhook, which can be
slow or hang. The tick only starts a round on a daemon thread, at most every
`interval_seconds` and never two at once; what a round raises is logged, and the next one
tries again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["BackgroundRound"]

log = logging.getLogger(__name__)


class BackgroundRound:
    """Runs `run` on a daemon thread named `name` when asked (`maybe_start`)."""

    def __init__(
        self,
        name: str,
        run: Callable[[], object],
        *,
        interval_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.interval_seconds = interval_seconds
        self._run = run
        self._clock = clock
        self._started_at: float | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def maybe_start(self) -> bool:
        """Start a round unless one runs or the last started less than `interval_seconds`
        ago; whether one was started."""
        now = self._clock()
        if self._started_at is not None and now - self._started_at < self.interval_seconds:
            return False
        if self.running:
            return False
        self._started_at = now
        self._thread = threading.Thread(target=self._logged, name=self.name, daemon=True)
        self._thread.start()
        return True

    def join(self, timeout: float | None = None) -> None:
        """Wait for the round started last to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _logged(self) -> None:
        try:
            self._run()
        except Exception:
            log.exception("%s round failed", self.name)
