"""A request's storage calls refused over HTTP: 504 when storage does not answer in time,
503 when every storage thread waits on it (pure logic, no storage)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tms.blocking_calls import BlockingCalls
from tms.http.storage_calls import (
    StorageBusy,
    StorageTimeout,
    call_storage,
    call_storage_async,
)


def test_a_hung_read_is_504_and_then_503_at_once_while_it_holds_the_thread() -> None:
    calls = BlockingCalls("tms-storage", threads=1, timeout=0.2)
    storage = threading.Event()
    try:
        with pytest.raises(StorageTimeout) as timed_out:
            call_storage(calls, storage.wait)
        assert (timed_out.value.status_code, timed_out.value.code) == (504, "storage_timeout")
        with pytest.raises(StorageBusy) as busy:  # refused at once: the slot is still taken
            call_storage(calls, lambda: 1)
        assert (busy.value.status_code, busy.value.code) == (503, "storage_busy")
    finally:
        storage.set()


def test_on_the_event_loop_no_free_thread_within_the_timeout_is_503() -> None:
    calls = BlockingCalls("tms-storage", threads=1, timeout=0.2)
    storage = threading.Event()

    async def scenario() -> None:
        with pytest.raises(StorageTimeout):
            await call_storage_async(calls, storage.wait)
        with pytest.raises(StorageBusy):
            await call_storage_async(calls, lambda: None)

    try:
        asyncio.run(scenario())
    finally:
        storage.set()


def test_results_and_storage_errors_come_back_as_they_are() -> None:
    calls = BlockingCalls("tms-storage", threads=2, timeout=60.0)

    def fails() -> None:
        raise FileNotFoundError("gone")

    assert call_storage(calls, lambda: 42) == 42
    assert asyncio.run(call_storage_async(calls, lambda: "ok")) == "ok"
    with pytest.raises(FileNotFoundError):
        call_storage(calls, fails)
