"""Background rounds: work the scheduler's tick starts and never waits on.

A cancel scan, a pull round and an alert round read storage or call a webhook, which can be
slow or hang. The tick only starts a round on a daemon thread of its own
(`tms.blocking_calls.start_thread`), at most every `interval_seconds` and never two at once;
what a round raises is logged, and the next one tries again. A round bounds its own calls
(storage on a `tms.blocking_calls.BlockingCalls` of its own).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, wait

from tms.blocking_calls import start_thread

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
        self._round: Future[None] | None = None

    @property
    def running(self) -> bool:
        return self._round is not None and not self._round.done()

    def maybe_start(self) -> bool:
        """Start a round unless one runs or the last started less than `interval_seconds`
        ago; whether one was started."""
        now = self._clock()
        if self._started_at is not None and now - self._started_at < self.interval_seconds:
            return False
        if self.running:
            return False
        self._started_at = now
        self._round = start_thread(self._logged, self.name)
        return True

    def join(self, timeout: float | None = None) -> None:
        """Wait for the round started last to end."""
        if self._round is not None:
            wait({self._round}, timeout)

    def _logged(self) -> None:
        try:
            self._run()
        except Exception:
            log.exception("%s round failed", self.name)
