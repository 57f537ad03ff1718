"""Storage calls made for a request, refused over HTTP when storage is slow or hung.

A request's storage calls run on the instance's `BlockingCalls` (`TMS_STORAGE_THREADS`
threads, each waited on for `TMS_STORAGE_TIMEOUT_SECONDS`). A call storage does not answer
in time is 504 `storage_timeout`; when every thread waits on storage the request is 503
`storage_busy`: at once for code on the server's threadpool (`call_storage`), after waiting
for a thread within the timeout for code on the event loop (`call_storage_async`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from tms.blocking_calls import BlockingCalls, CallsBusy
from tms.http.errors import ApiError

__all__ = ["StorageBusy", "StorageTimeout", "call_storage", "call_storage_async"]

T = TypeVar("T")
log = logging.getLogger(__name__)


class StorageTimeout(ApiError):
    """504 `storage_timeout`: storage did not answer in time."""

    def __init__(self) -> None:
        super().__init__(
            504, "storage_timeout", "the table's storage did not answer in time; retry later"
        )


class StorageBusy(ApiError):
    """503 `storage_busy`: every storage thread is taken (storage is slow or hung)."""

    def __init__(self) -> None:
        super().__init__(
            503, "storage_busy", "too many storage calls are waiting for storage; retry later"
        )


def call_storage(calls: BlockingCalls, fn: Callable[[], T]) -> T:
    """`calls.run(fn)` for a route on the server's threadpool: 503 at once when every
    thread is taken, 504 after the timeout."""
    with _refused(calls, "storage calls: all %d slots are taken; refusing a call", calls.threads):
        return calls.run(fn)


async def call_storage_async(calls: BlockingCalls, fn: Callable[[], T]) -> T:
    """`calls.run_async(fn)` for code on the event loop: 503 when no thread came free within
    the timeout, 504 when storage did not answer within it."""
    with _refused(calls, "storage calls: no free slot within %.1f s", calls.timeout):
        return await calls.run_async(fn)


@contextmanager
def _refused(calls: BlockingCalls, busy: str, *args: object) -> Iterator[None]:
    """`CallsBusy` as 503 (logged with `busy % args`), a timeout as 504."""
    try:
        yield
    except CallsBusy:
        log.warning(busy, *args)
        raise StorageBusy() from None
    except TimeoutError:
        log.warning("storage call timed out after %.1f s", calls.timeout)
        raise StorageTimeout() from None
