"""Heartbeats: `.hoodie/.heartbeat/<instant>`, whose modification time is the last beat.

Hudi counts a writer dead after `interval × tolerable misses` without a beat; a rollback of an
inflight instant with a live heartbeat would destroy a running write.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

from tms.hudi.storage import Storage

HEARTBEAT_FOLDER = ".hoodie/.heartbeat"
DEFAULT_INTERVAL_SECONDS = 60.0
DEFAULT_TOLERABLE_MISSES = 2


def heartbeat_path(instant_time: str) -> str:
    return f"{HEARTBEAT_FOLDER}/{instant_time}"


def beat(storage: Storage, instant_time: str) -> None:
    storage.touch(heartbeat_path(instant_time))


def last_beat(storage: Storage, instant_time: str) -> float | None:
    """Seconds since the epoch of the last beat, or None without a heartbeat file."""
    path = heartbeat_path(instant_time)
    if not storage.exists(path):
        return None
    return storage.modified(path)


def is_alive(
    storage: Storage,
    instant_time: str,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    tolerable_misses: int = DEFAULT_TOLERABLE_MISSES,
    now: float | None = None,
) -> bool:
    beat_time = last_beat(storage, instant_time)
    if beat_time is None:
        return False
    now = time.time() if now is None else now
    return now - beat_time <= interval * tolerable_misses


def stop_heartbeat(storage: Storage, instant_time: str) -> None:
    storage.delete(heartbeat_path(instant_time))


class Heartbeat:
    """Beats from a background thread while a write runs; stops (and deletes) on exit."""

    def __init__(
        self, storage: Storage, instant_time: str, interval: float = DEFAULT_INTERVAL_SECONDS
    ) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"heartbeat-{instant_time}", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        beat(self.storage, self.instant_time)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        stop_heartbeat(self.storage, self.instant_time)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            beat(self.storage, self.instant_time)
