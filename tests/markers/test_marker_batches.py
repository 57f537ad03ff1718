"""What a batch of timeline-server markers writes: on storage that appends, the batch alone
(bytes written = bytes of markers); elsewhere the file rewritten whole, but never past
`ROLLOVER_BYTES` before a new `MARKERS<n>` starts. Either way Hudi's reading of the folder
(every line of every `MARKERS<n>`) finds every marker once, and a restarted state goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tms.blocking_calls import BlockingCalls
from tms.hudi.files import timeline_markers
from tms.hudi.storage import Storage
from tms.markers import state as marker_state
from tms.markers.state import MarkerDirState

INSTANT = "20260101120000000"
BATCHES = 60
PER_BATCH = 20


class CountingStorage(Storage):
    """Local storage that records the bytes of every write; `can_append` False makes it
    behave as an object store does (no append: files are rewritten whole)."""

    def __init__(self, base_path: str, *, can_append: bool) -> None:
        super().__init__(base_path)
        self.can_append = can_append
        self.writes: list[int] = []

    @property
    def appends(self) -> bool:
        return self.can_append

    def write_bytes(self, path: str, data: bytes, *, atomic: bool = True) -> None:
        self.writes.append(len(data))
        super().write_bytes(path, data, atomic=atomic)

    def append_bytes(self, path: str, data: bytes) -> None:
        self.writes.append(len(data))
        super().append_bytes(path, data)


def name(i: int) -> str:
    return f"city=sf/{i:08d}-0000-0000-0000-000000000000-0_0-1-0_{INSTANT}.parquet.marker.CREATE"


async def create_in_batches(state: MarkerDirState, start: int) -> list[bool]:
    answers: list[bool] = []
    for batch in range(BATCHES):
        first = start + batch * PER_BATCH
        answers += await asyncio.gather(
            *(state.create(name(i)) for i in range(first, first + PER_BATCH))
        )
    return answers


def new_state(storage: Storage, files: int = 3) -> MarkerDirState:
    calls = BlockingCalls("tms-storage", threads=2, timeout=60.0)
    state = MarkerDirState(storage, INSTANT, files=files, interval_seconds=0, storage_calls=calls)
    state.load()
    return state


def marker_bytes(count: int) -> int:
    return len(timeline_markers.marker_lines(name(i) for i in range(count)))


def test_batches_are_appended_where_storage_appends(tmp_path: Path) -> None:
    storage = CountingStorage(str(tmp_path), can_append=True)
    answers = asyncio.run(create_in_batches(new_state(storage), 0))
    assert answers == [True] * BATCHES * PER_BATCH
    type_file = len(timeline_markers.TIMELINE_SERVER_BASED)
    assert sum(storage.writes) == marker_bytes(BATCHES * PER_BATCH) + type_file
    on_storage = timeline_markers.read_marker_files(storage, INSTANT)
    assert sorted(n for names in on_storage.values() for n in names) == sorted(
        name(i) for i in range(BATCHES * PER_BATCH)
    )

    restarted = new_state(storage)  # another instance takes the table over
    again = asyncio.run(create_in_batches(restarted, BATCHES * PER_BATCH // 2))
    assert again[: BATCHES * PER_BATCH // 2] == [False] * (BATCHES * PER_BATCH // 2)
    assert len(
        {
            n
            for names in timeline_markers.read_marker_files(storage, INSTANT).values()
            for n in names
        }
    ) == (BATCHES * PER_BATCH * 3 // 2)


def test_rewritten_files_roll_over_so_a_batch_rewrites_little(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rollover = 8 * 1024
    monkeypatch.setattr(marker_state, "ROLLOVER_BYTES", rollover)
    storage = CountingStorage(str(tmp_path), can_append=False)
    answers = asyncio.run(create_in_batches(new_state(storage), 0))
    assert answers == [True] * BATCHES * PER_BATCH
    batch = marker_bytes(PER_BATCH)
    assert max(storage.writes) < rollover + batch
    total = marker_bytes(BATCHES * PER_BATCH)
    assert total > 10 * rollover
    assert sum(storage.writes) < total * (rollover / batch)  # not quadratic in the total
    on_storage = timeline_markers.read_marker_files(storage, INSTANT)
    assert len(on_storage) > 3, "slots moved on to new files"
    assert sorted(n for names in on_storage.values() for n in names) == sorted(
        name(i) for i in range(BATCHES * PER_BATCH)
    )


def test_a_torn_last_line_is_not_read_as_a_marker(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    path = timeline_markers.marker_file_path(INSTANT, 0)
    storage.write_bytes(path, timeline_markers.marker_lines([name(1)]) + name(2)[:30].encode())
    assert timeline_markers.read_marker_files(storage, INSTANT) == {0: [name(1)]}
