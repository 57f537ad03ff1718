"""`BlockingCalls`: storage calls bounded in number and time (pure logic, no storage)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from tms.blocking_calls import BlockingCalls, CallsBusy, CallTimeout, start_thread

BOUND = 60.0
"""Generous bound on waits for a condition (never a timed assertion)."""


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_results_and_errors_come_back() -> None:
    calls = BlockingCalls("tms-storage", threads=2, timeout=BOUND)
    assert calls.run(lambda: 42) == 42

    def fails() -> None:
        raise FileNotFoundError("gone")

    with pytest.raises(FileNotFoundError):
        calls.run(fails)
    assert asyncio.run(calls.run_async(lambda: "ok")) == "ok"


def test_calls_run_on_daemon_threads_named_by_their_pool() -> None:
    calls = BlockingCalls("tms-pull-storage", threads=1, timeout=BOUND)
    thread = calls.run(threading.current_thread)
    assert (thread.name, thread.daemon) == ("tms-pull-storage", True)
    assert thread is not threading.current_thread()
    started = start_thread(threading.current_thread, "tms-pull").result(BOUND)
    assert (started.name, started.daemon) == ("tms-pull", True)


def test_a_hung_call_times_out_and_keeps_its_slot_until_storage_answers() -> None:
    calls = BlockingCalls("tms-storage", threads=1, timeout=0.2)
    storage = threading.Event()
    with pytest.raises(CallTimeout) as timed_out:
        calls.run(storage.wait)
    assert str(timed_out.value) == "storage did not answer within 0.2s"
    with pytest.raises(CallsBusy):  # refused at once: the slot is still taken
        calls.run(lambda: 1)
    storage.set()

    def works() -> bool:
        try:
            return calls.run(lambda: True)
        except CallsBusy:
            return False

    _until(works)


def test_async_callers_wait_for_a_slot_within_the_timeout() -> None:
    calls = BlockingCalls("tms-storage", threads=1, timeout=BOUND)
    storage = threading.Event()
    started = threading.Event()

    def hung() -> str:
        started.set()
        storage.wait()
        return "first"

    async def scenario() -> list[str]:
        first = asyncio.ensure_future(calls.run_async(hung))
        await asyncio.to_thread(started.wait)
        second = asyncio.ensure_future(calls.run_async(lambda: "second"))
        await asyncio.sleep(0)  # the second is queued for the slot, not refused
        assert not second.done()
        storage.set()
        return [await first, await second]

    assert asyncio.run(scenario()) == ["first", "second"]


def test_an_async_caller_that_gives_up_passes_the_slot_on() -> None:
    calls = BlockingCalls("tms-storage", threads=1, timeout=0.2)
    storage = threading.Event()

    async def scenario() -> None:
        holder = asyncio.ensure_future(calls.run_async(storage.wait))
        with pytest.raises(CallTimeout):
            await holder
        with pytest.raises(CallsBusy):  # no slot came free within the timeout
            await calls.run_async(lambda: None)
        waiting = asyncio.ensure_future(calls.run_async(lambda: None))
        await asyncio.sleep(0)
        waiting.cancel()  # the request went away while it waited
        storage.set()
        deadline = time.monotonic() + BOUND
        while True:  # the slot comes back: neither the cancelled nor the late waiter keeps it
            try:
                assert await calls.run_async(lambda: "again") == "again"
                return
            except CallsBusy:
                assert time.monotonic() < deadline

    asyncio.run(scenario())
