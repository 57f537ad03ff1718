"""Storage reads made on behalf of requests: bounded in number and in time.

A storage that never answers (a hung NFS mount, an object store behind a dead proxy, a
FIFO where `hoodie.properties` should be) must not take the server with it. Each read runs
on a thread of its own, at most `threads` at once, and the request waits for it at most
`timeout` seconds (504 `storage_timeout`). A read that times out keeps its slot until
storage answers (a thread cannot be stopped), which is what bounds the damage.

When every slot is taken, a route running on the server's threadpool is refused at once
(503 `storage_busy`): waiting would hold one of the threads the probes need. Code on the
event loop (the commit callback) waits for a slot within its timeout instead, which holds
no thread, so a burst of writers' notifications is served rather than refused.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from tms.http.errors import ApiError

__all__ = ["StorageBusy", "StorageCalls", "StorageTimeout"]

T = TypeVar("T")
log = logging.getLogger(__name__)


class StorageTimeout(ApiError):
    """504 `storage_timeout`: storage did not answer in time."""

    def __init__(self) -> None:
        super().__init__(
            504, "storage_timeout", "the table's storage did not answer in time; retry later"
        )


class StorageBusy(ApiError):
    """503 `storage_busy`: every storage slot is taken (storage is slow or hung)."""

    def __init__(self) -> None:
        super().__init__(
            503, "storage_busy", "too many storage reads are waiting for storage; retry later"
        )


class StorageCalls:
    """Runs storage reads on at most `threads` daemon threads, each waited on for at most
    `timeout` seconds (daemon threads: a hung read does not keep the process alive)."""

    def __init__(self, *, threads: int, timeout: float) -> None:
        self.threads = threads
        self.timeout = timeout
        self._lock = threading.Lock()
        self._free = threads
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()` from a storage thread, for threadpool code: `StorageBusy` at once when
        every slot is taken, `StorageTimeout` after `timeout` seconds."""
        if not self._take():
            log.warning("storage reads: all %d slots are taken; refusing a read", self.threads)
            raise StorageBusy()
        future = self._start(fn)
        try:
            return future.result(timeout=self.timeout)
        except FutureTimeout:
            log.warning("storage read timed out after %.1f s", self.timeout)
            raise StorageTimeout() from None

    async def run_async(self, fn: Callable[[], T]) -> T:
        """`fn()` from a storage thread, for the event loop: waits for a slot and for the
        read within `timeout` seconds in all; waiting holds no thread."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        if not self._take():
            slot: asyncio.Future[None] = loop.create_future()
            with self._lock:
                self._waiters.append((loop, slot))
            try:
                await asyncio.wait({slot}, timeout=self.timeout)
            except BaseException:  # the request was cancelled while it waited
                if not slot.cancel():
                    self._give_back()  # it had been handed the slot: pass it on
                raise
            if not slot.done():
                slot.cancel()  # a slot handed over later goes to the next waiter
                log.warning("storage reads: no free slot within %.1f s", self.timeout)
                raise StorageBusy()
        future = self._start(fn)
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(future), max(deadline - loop.time(), 0)
            )
        except TimeoutError:
            log.warning("storage read timed out after %.1f s", self.timeout)
            raise StorageTimeout() from None

    def _take(self) -> bool:
        with self._lock:
            if self._free == 0:
                return False
            self._free -= 1
            return True

    def _give_back(self) -> None:
        """A slot is free: to the longest waiting coroutine, else back to the pool."""
        with self._lock:
            while self._waiters:
                loop, slot = self._waiters.popleft()
                if slot.done() or loop.is_closed():
                    continue
                try:
                    loop.call_soon_threadsafe(self._hand_over, slot)
                except RuntimeError:  # the loop closed meanwhile
                    continue
                return
            self._free += 1

    def _hand_over(self, slot: asyncio.Future[None]) -> None:
        """On the waiter's loop: it takes the slot unless it gave up meanwhile."""
        if slot.done():
            self._give_back()
        else:
            slot.set_result(None)

    def _start(self, fn: Callable[[], T]) -> Future[T]:
        """Run `fn` on a new daemon thread that holds a slot already taken."""
        future: Future[T] = Future()

        def work() -> None:
            try:
                if not future.set_running_or_notify_cancel():
                    return  # the waiter gave up before the read started
                result = fn()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
            finally:
                self._give_back()

        try:
            threading.Thread(target=work, name="tms-storage", daemon=True).start()
        except BaseException:
            self._give_back()
            raise
        return future
