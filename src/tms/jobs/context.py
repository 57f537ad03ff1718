"""Which attempt the running code works for, carried into the threads an attempt starts.

A resident worker runs several attempts in one process: each attempt's log file takes the
log lines of its own threads only (`attempt_log_filter`), by this context variable, which
`attempt_thread` copies into every thread the attempt starts.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable

__all__ = ["ATTEMPT", "AttemptLogFilter", "attempt_thread"]

ATTEMPT: contextvars.ContextVar[int | None] = contextvars.ContextVar("tms_attempt", default=None)
"""The attempt whose work this is (None outside any attempt)."""


def attempt_thread(target: Callable[[], object], name: str) -> threading.Thread:
    """A daemon thread running `target` in a copy of the caller's context (its attempt)."""
    context = contextvars.copy_context()
    return threading.Thread(target=context.run, args=(target,), name=name, daemon=True)


class AttemptLogFilter(logging.Filter):
    """Passes the records logged for one attempt."""

    def __init__(self, attempt_id: int) -> None:
        super().__init__()
        self.attempt_id = attempt_id

    def filter(self, record: logging.LogRecord) -> bool:
        return ATTEMPT.get() == self.attempt_id
