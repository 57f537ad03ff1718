"""Storage calls of marker requests: bounded in number and in time.

A storage that never answers must not hold a writer's Spark task forever, nor take the
instance's threads or its shutdown with it. Each call runs on a daemon thread of its own,
at most `threads` at once (503 `storage_busy` beyond), and is waited on for at most
`timeout` seconds (504 `storage_timeout`); Hudi's client then fails the task, which Spark
retries. A call that timed out keeps its slot until storage answers (a thread cannot be
stopped), which is what bounds the damage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tms.http.errors import ApiError

__all__ = ["MarkerStorageBusy", "MarkerStorageTimeout", "StorageThreads"]

T = TypeVar("T")
log = logging.getLogger(__name__)


class MarkerStorageTimeout(ApiError):
    """504 `storage_timeout`: the table's storage did not answer in time."""

    def __init__(self) -> None:
        super().__init__(
            504, "storage_timeout", "the table's storage did not answer in time; retry later"
        )


class MarkerStorageBusy(ApiError):
    """503 `storage_busy`: every storage thread waits on storage."""

    def __init__(self) -> None:
        super().__init__(
            503, "storage_busy", "too many marker calls are waiting for storage; retry later"
        )


class StorageThreads:
    """Runs marker storage calls on at most `threads` daemon threads, each waited on for at
    most `timeout` seconds."""

    def __init__(self, *, threads: int, timeout: float) -> None:
        self.threads = threads
        self.timeout = timeout
        self._lock = threading.Lock()
        self._running = 0

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on a storage thread, within the timeout."""
        return await self.wait(self.start(fn, *args))

    def start(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """`fn(*args)` started on a storage thread (`MarkerStorageBusy` when none is free);
        its failure is retrieved even when nobody waits for it."""
        with self._lock:
            if self._running >= self.threads:
                log.warning("marker storage: all %d threads wait on storage", self.threads)
                raise MarkerStorageBusy()
            self._running += 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        future.add_done_callback(_retrieve)

        def call() -> None:
            try:
                result = fn(*args)
            except BaseException as exc:
                _settle_soon(loop, future, None, exc)
            else:
                _settle_soon(loop, future, result, None)
            finally:
                with self._lock:
                    self._running -= 1

        threading.Thread(target=call, name="tms-marker-storage", daemon=True).start()
        return future

    async def wait(self, work: asyncio.Future[T]) -> T:
        """The result of `work`, waited on for at most the timeout."""
        try:
            return await asyncio.wait_for(asyncio.shield(work), self.timeout)
        except TimeoutError:
            log.warning("a marker storage call timed out after %.1f s", self.timeout)
            raise MarkerStorageTimeout() from None


def _settle_soon(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
        loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _retrieve(work: asyncio.Future[Any]) -> None:
    if not work.cancelled():
        work.exception()
