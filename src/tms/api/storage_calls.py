"""Storage reads made on behalf of requests: bounded in number and in time.

A storage that never answers (a hung NFS mount, an object store behind a dead proxy, a
FIFO where `hoodie.properties` should be) must not take the server with it. Each read runs
on a thread of its own, at most `threads` at once, and the request waits for it at most
`timeout` seconds; a read that finds every slot taken is refused at once, so requests that
wait on storage never hold more than `threads` of the server's threads and the probes and
the commit callback keep theirs. A read that times out keeps its slot until storage
answers (a thread cannot be stopped), which is what bounds the damage.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Annotated, TypeVar

from fastapi import Depends, Request

from tms.api.errors import ApiError

__all__ = ["StorageBusy", "StorageCalls", "StorageCallsDep", "StorageTimeout", "storage_calls"]

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
        self._slots = threading.BoundedSemaphore(threads)

    def start(self, fn: Callable[[], T]) -> Future[T]:
        """Start `fn` on a free slot; `StorageBusy` when there is none."""
        if not self._slots.acquire(blocking=False):
            log.warning("storage reads: all %d slots are taken; refusing a read", self.threads)
            raise StorageBusy()
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
                self._slots.release()

        try:
            threading.Thread(target=work, name="tms-storage", daemon=True).start()
        except BaseException:
            self._slots.release()
            raise
        return future

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()` from a worker thread; `StorageTimeout` after `timeout` seconds."""
        future = self.start(fn)
        try:
            return future.result(timeout=self.timeout)
        except FutureTimeout:
            log.warning("storage read timed out after %.1f s", self.timeout)
            raise StorageTimeout() from None

    async def run_async(self, fn: Callable[[], T]) -> T:
        """`run` for the event loop: waiting holds no thread."""
        future = self.start(fn)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        except TimeoutError:
            log.warning("storage read timed out after %.1f s", self.timeout)
            raise StorageTimeout() from None


async def storage_calls(request: Request) -> StorageCalls:
    """The application's `StorageCalls` (made by `tms.api.app.create_app`); no I/O, so a
    dependency on the event loop."""
    calls: StorageCalls = request.app.state.storage_calls
    return calls


StorageCallsDep = Annotated[StorageCalls, Depends(storage_calls)]
