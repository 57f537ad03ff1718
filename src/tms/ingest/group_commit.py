"""Group commit: concurrent requests share one database transaction.

Each notification must be durable before its 2xx, and a transaction's commit (a WAL flush
and its round trips) costs far more than one more row in it. Requests hand their item to a
`GroupCommit` and wait; a flusher writes everything waiting as one batch in a worker thread.
Nothing waits for a batch to fill: a lone request is written at once, and whatever arrives
while batches are being written forms the next one. A few flushers run at once
(`max_in_flight`), so the event loop serves the next requests while a batch waits for
PostgreSQL, instead of all clients waiting on one batch and the server idling meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    """Batches items for `write`, which stores a batch in one transaction and returns one
    result per item, in order.

    When a batch fails, its items are written again one by one, so one bad item fails only
    its own request; each waiting request gets its own result or exception. Failures that
    `whole_batch_failure` recognises (the database is unreachable) fail every item at once
    instead: writing each alone would only wait for the same failure again, item by item.
    """

    def __init__(
        self,
        write: Callable[[Sequence[T]], Sequence[R]],
        *,
        max_batch: int,
        max_in_flight: int = 1,
        whole_batch_failure: Callable[[Exception], bool] = lambda exc: False,
    ) -> None:
        if max_batch < 1 or max_in_flight < 1:
            raise ValueError("max_batch and max_in_flight must be at least 1")
        self._write = write
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._whole_batch_failure = whole_batch_failure
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._flushers: set[asyncio.Task[None]] = set()  # referenced, so never collected

    async def submit(self, item: T) -> R:
        """Wait until `item` is written (committed) and return its result."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if len(self._flushers) < self._max_in_flight:
            flusher = asyncio.get_running_loop().create_task(self._flush())
            self._flushers.add(flusher)
        return await future

    async def _flush(self) -> None:
        flusher = asyncio.current_task()
        assert flusher is not None
        try:
            while self._waiting:
                batch = self._waiting[: self._max_batch]
                del self._waiting[: self._max_batch]
                items = [item for item, _ in batch]
                try:
                    results = await asyncio.to_thread(self._write_all, items)
                except BaseException as exc:  # cancelled (shutdown): fail everything waiting
                    batch += self._waiting
                    self._waiting.clear()
                    for _, future in batch:
                        if future.done():
                            continue
                        if isinstance(exc, asyncio.CancelledError):
                            future.cancel()
                        else:
                            future.set_exception(exc)
                    raise
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():  # its request was cancelled
                        continue
                    if isinstance(result, BaseException):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._flushers.discard(flusher)  # no await since the last check

    def _write_all(self, items: list[T]) -> list[R | BaseException]:
        """The batch at once; if that fails, each item alone."""
        try:
            results = list(self._write(items))
        except Exception as exc:
            if len(items) == 1 or self._whole_batch_failure(exc):
                return [exc] * len(items)
            log.info("a batch of %d failed (%s); writing its items one by one", len(items), exc)
        else:
            if len(results) != len(items):
                raise RuntimeError(f"write returned {len(results)} results for {len(items)}")
            return list(results)
        alone: list[R | BaseException] = []
        for item in items:
            try:
                alone.extend(self._write([item]))
            except Exception as exc:
                alone.append(exc)
        return alone
