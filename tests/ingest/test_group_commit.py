"""Group commit without a database: how waiting requests become batches."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from tms.ingest.group_commit import GroupCommit


class Recorder:
    """A write function that records its batches; `hold` keeps the first one in flight."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.fail_on = fail_on
        self.hold = threading.Event()
        self.entered = threading.Event()
        self.calls = 0

    def __call__(self, items: Sequence[int]) -> list[str]:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            self.hold.wait(10)
        self.batches.append(list(items))
        if self.fail_on in items:
            raise ValueError(f"item {self.fail_on} is bad")
        return [f"stored {i}" for i in items]


async def _submit_while_first_is_in_flight(
    commits: GroupCommit[int, str], recorder: Recorder, items: range
) -> list[str | BaseException]:
    first = asyncio.create_task(commits.submit(-1))
    await asyncio.to_thread(recorder.entered.wait, 10)
    rest = [asyncio.create_task(commits.submit(i)) for i in items]
    await asyncio.sleep(0)  # every request is waiting now
    recorder.hold.set()
    results = await asyncio.gather(first, *rest, return_exceptions=True)
    return list(results)


def test_requests_arriving_during_a_write_share_the_next_batch() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder, max_batch=4)
    results = asyncio.run(_submit_while_first_is_in_flight(commits, recorder, range(10)))
    assert results == ["stored -1"] + [f"stored {i}" for i in range(10)]
    assert recorder.batches == [[-1], [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_a_bad_item_fails_only_its_own_request() -> None:
    recorder = Recorder(fail_on=2)
    commits = GroupCommit(recorder, max_batch=10)
    results = asyncio.run(_submit_while_first_is_in_flight(commits, recorder, range(4)))
    assert results[:3] == ["stored -1", "stored 0", "stored 1"]
    assert isinstance(results[3], ValueError) and str(results[3]) == "item 2 is bad"
    assert results[4] == "stored 3"
    # The batch failed as a whole, then each item was written alone.
    assert recorder.batches == [[-1], [0, 1, 2, 3], [0], [1], [2], [3]]


def test_a_lone_request_is_written_at_once_and_flushing_starts_again_later() -> None:
    recorder = Recorder()
    recorder.hold.set()
    commits = GroupCommit(recorder, max_batch=10)

    async def one_at_a_time() -> list[str]:
        return [await commits.submit(i) for i in range(3)]

    assert asyncio.run(one_at_a_time()) == ["stored 0", "stored 1", "stored 2"]
    assert recorder.batches == [[0], [1], [2]]


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        GroupCommit(Recorder(), max_batch=0)


def test_a_whole_batch_failure_is_not_retried_item_by_item() -> None:
    recorder = Recorder(fail_on=1)
    commits = GroupCommit(recorder, max_batch=10, whole_batch_failure=lambda exc: "bad" in str(exc))
    results = asyncio.run(_submit_while_first_is_in_flight(commits, recorder, range(3)))
    assert results[0] == "stored -1"
    assert all(isinstance(r, ValueError) for r in results[1:])
    assert recorder.batches == [[-1], [0, 1, 2]]


def test_with_two_in_flight_a_second_batch_is_written_while_the_first_waits() -> None:
    recorder = Recorder()
    commits = GroupCommit(recorder, max_batch=10, max_in_flight=2)

    async def run() -> tuple[list[str], str]:
        first = asyncio.create_task(commits.submit(-1))
        await asyncio.to_thread(recorder.entered.wait, 10)
        rest = await asyncio.gather(*(commits.submit(i) for i in range(3)))
        recorder.hold.set()  # the first batch is still waiting here
        return list(rest), await first

    rest, first = asyncio.run(run())
    assert (rest, first) == (["stored 0", "stored 1", "stored 2"], "stored -1")
    assert recorder.batches == [[0, 1, 2], [-1]]
