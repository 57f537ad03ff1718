"""Blocking storage calls, run off their caller's thread: bounded in number and in time.

A storage that never answers (a hung NFS mount, an object store behind a dead proxy, a
FIFO where `hoodie.properties` should be) must not take its caller with it, be it a request
or a background round. Each call runs on a daemon thread of its own (a hung call does not
keep the process alive), at most `threads` at once, and its caller waits for it at most
`timeout` seconds (`CallTimeout`). A call that times out keeps its slot until storage
answers (a thread cannot be stopped), which is what bounds the damage: once every slot is
held, calls are refused (`CallsBusy`).

Code on a thread (a route on the server's threadpool, a background round) is refused at
once when every slot is taken (`run`): waiting would hold its thread. Code on the event loop
waits for a slot within its timeout instead (`run_async`), which holds no thread, so a burst
is served rather than refused.

Work nobody waits on (a background round) starts on a daemon thread of its own
(`start_thread`), the same way.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import TypeVar

__all__ = ["BlockingCalls", "CallTimeout", "CallsBusy", "start_thread"]

T = TypeVar("T")


class CallTimeout(TimeoutError):
    """Storage did not answer within the timeout (the call goes on, holding its slot)."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"storage did not answer within {timeout:g}s")
        self.timeout = timeout


class CallsBusy(Exception):
    """Every slot is taken by calls storage has not answered."""


def start_thread(fn: Callable[[], T], name: str) -> Future[T]:
    """`fn()` on a new daemon thread named `name`, its result or exception in the future
    returned; cancelling the future before the thread runs `fn` cancels the call."""
    future: Future[T] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return  # the waiter gave up before the call started
        try:
            result = fn()
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=work, name=name, daemon=True).start()
    return future


class BlockingCalls:
    """Runs blocking calls on at most `threads` daemon threads named `name`, each waited on
    for at most `timeout` seconds."""

    def __init__(self, name: str, *, threads: int, timeout: float) -> None:
        self.name = name
        self.threads = threads
        self.timeout = timeout
        self._lock = threading.Lock()
        self._free = threads
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()` on a call thread, for code on a thread: `CallsBusy` at once when every
        slot is taken, `CallTimeout` after `timeout` seconds."""
        if not self._take():
            raise CallsBusy(f"all {self.threads} {self.name} threads wait on storage")
        future = self._start(fn)
        done, _ = wait({future}, timeout=self.timeout)
        if not done:
            raise CallTimeout(self.timeout)
        return future.result()

    async def run_async(self, fn: Callable[[], T]) -> T:
        """`fn()` on a call thread, for the event loop: waits for a slot and for the call
        within `timeout` seconds in all (`CallsBusy` when no slot came free, `CallTimeout`
        when the call did not return); waiting holds no thread."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        if not self._take():
            slot: asyncio.Future[None] = loop.create_future()
            with self._lock:
                self._waiters.append((loop, slot))
            try:
                await asyncio.wait({slot}, timeout=self.timeout)
            except BaseException:  # the caller was cancelled while it waited
                if not slot.cancel():
                    self._give_back()  # it had been handed the slot: pass it on
                raise
            if not slot.done():
                slot.cancel()  # a slot handed over later goes to the next waiter
                raise CallsBusy(f"no {self.name} thread came free within {self.timeout:g}s")
        future = asyncio.wrap_future(self._start(fn))
        done, _ = await asyncio.wait({future}, timeout=max(deadline - loop.time(), 0))
        if not done:
            future.cancel()  # the call, if it has not started yet, never runs
            raise CallTimeout(self.timeout)
        return future.result()

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
        """`fn` on a new thread that holds a slot already taken until the call ends."""
        try:
            future = start_thread(fn, self.name)
        except BaseException:
            self._give_back()
            raise
        future.add_done_callback(lambda _: self._give_back())
        return future
