"""`StorageCalls`: storage reads bounded in number and time (pure logic, no storage)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from tms.ingest.storage_calls import StorageBusy, StorageCalls, StorageTimeout

BOUND = 60.0
"""Generous bound on waits for a condition (never a timed assertion)."""


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_results_and_errors_come_back() -> None:
    calls = StorageCalls(threads=2, timeout=BOUND)
    assert calls.run(lambda: 42) == 42

    def fails() -> None:
        raise FileNotFoundError("gone")

    with pytest.raises(FileNotFoundError):
        calls.run(fails)
    assert asyncio.run(calls.run_async(lambda: "ok")) == "ok"


def test_a_hung_read_times_out_and_keeps_its_slot_until_storage_answers() -> None:
    calls = StorageCalls(threads=1, timeout=0.2)
    storage = threading.Event()
    with pytest.raises(StorageTimeout) as timed_out:
        calls.run(storage.wait)
    assert (timed_out.value.status_code, timed_out.value.code) == (504, "storage_timeout")
    with pytest.raises(StorageBusy) as busy:  # refused at once: the slot is still taken
        calls.run(lambda: 1)
    assert (busy.value.status_code, busy.value.code) == (503, "storage_busy")
    storage.set()

    def works() -> bool:
        try:
            return calls.run(lambda: True)
        except StorageBusy:
            return False

    _until(works)


def test_async_callers_wait_for_a_slot_within_the_timeout() -> None:
    calls = StorageCalls(threads=1, timeout=BOUND)
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
    calls = StorageCalls(threads=1, timeout=0.2)
    storage = threading.Event()

    async def scenario() -> None:
        holder = asyncio.ensure_future(calls.run_async(storage.wait))
        with pytest.raises(StorageTimeout):
            await holder
        with pytest.raises(StorageBusy):  # no slot came free within the timeout
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
            except StorageBusy:
                assert time.monotonic() < deadline

    asyncio.run(scenario())
