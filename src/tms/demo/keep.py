"""`tms demo --keep-running`: the service stays up after the demo, so a new user can look at
what just happened (the console, the API, the logs), until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["STOP_SIGNALS", "console_url", "wait_for_stop"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def console_url(service_url: str) -> str:
    """The web console of the service at `service_url`."""
    return f"{service_url.rstrip('/')}/ui"


def wait_for_stop(stop: threading.Event | None = None, *, poll_seconds: float = 0.5) -> str | None:
    """Wait until Ctrl-C or SIGTERM (the signal's name) or until `stop` is set (None).

    Called from the main thread: the two signals only set an event while it waits (no
    KeyboardInterrupt in the middle of a stop, and SIGTERM no longer ends the process
    without stopping the service), and their handlers are restored afterwards."""
    stop = stop or threading.Event()
    received: list[str] = []

    def handler(number: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(number).name)
        stop.set()

    with _handling(handler):
        while not stop.wait(poll_seconds):
            pass
    return received[0] if received else None


@contextmanager
def _handling(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    try:
        for number in STOP_SIGNALS:
            signal.signal(number, handler)
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)
