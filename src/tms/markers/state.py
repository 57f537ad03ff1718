"""One instant's timeline-server markers, kept in memory by the instance that owns the table
and written to storage in batches, as Hudi's `MarkerDirState` does.

Creation requests gather for the batch interval; each batch then takes a free slot (round
robin over `files` of them, one batch per slot at a time) and adds the markers not already
known to the slot's current `MARKERS<n>` file, `MARKERS.type` first. Where storage appends
(local and mounted file systems) the batch is appended; elsewhere the file is rewritten whole,
and once it holds `ROLLOVER_BYTES` the slot moves on to a new file (`n + files`), so a batch
rewrites at most that much, not every marker of the instant. A request is answered once its
batch is on storage: `true` for a new marker, `false` for one already there. A new state reads
back what storage holds, so a restart or another instance taking the table over goes on from
there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from functools import partial

from tms import metrics
from tms.blocking_calls import BlockingCalls
from tms.http.storage_calls import call_storage_async
from tms.hudi.files import timeline_markers
from tms.hudi.storage import Storage

__all__ = ["ROLLOVER_BYTES", "MarkerDirState"]

ROLLOVER_BYTES = 1024 * 1024
"""Size past which a slot that rewrites its file starts a new one."""

log = logging.getLogger(__name__)


class MarkerDirState:
    """The markers of `instant_time` on the table at `storage`."""

    def __init__(
        self,
        storage: Storage,
        instant_time: str,
        *,
        files: int,
        interval_seconds: float,
        storage_calls: BlockingCalls,
    ) -> None:
        self.storage = storage
        self.calls = storage_calls
        self.instant_time = instant_time
        self.files = files
        self.interval = interval_seconds
        self.all: set[str] = set()
        self._file_markers: dict[int, list[str]] = {}
        """Marker names of each `MARKERS<n>` file, by n."""
        self._file_bytes: dict[int, int] = {}
        self._slot_file: dict[int, int] = {}
        """The file each slot writes now (slot k writes k, then k + files, …)."""
        self._type_written = False
        self._pending: list[tuple[str, asyncio.Future[bool]]] = []
        self._busy: set[int] = set()
        self._last_slot = -1
        self._dispatching = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.conflicted = False
        """A conflict was found: early conflict detection refuses every later marker."""
        self.known_completed: frozenset[str] | None = None
        """Instants completed when early conflict detection first ran for this instant."""

    def _write(self, index: int, added: list[str], whole: list[str]) -> None:
        """`MARKERS.type` once, then `added` into file `index`: appended where storage
        appends, else the file rewritten `whole` (blocking)."""
        if not self._type_written:
            timeline_markers.write_marker_type(self.storage, self.instant_time)
            self._type_written = True
        if not added:
            return
        if self.storage.appends:
            timeline_markers.append_marker_file(self.storage, self.instant_time, index, added)
        else:
            timeline_markers.write_marker_file(self.storage, self.instant_time, index, whole)

    # Reading back ---------------------------------------------------------------------------

    def load(self) -> None:
        """What storage holds (blocking: call it off the event loop)."""
        files = timeline_markers.read_marker_files(self.storage, self.instant_time)
        for index, names in files.items():
            kept = self._file_markers.setdefault(index, [])
            for name in names:
                if name not in self.all:
                    self.all.add(name)
                    kept.append(name)
            self._file_bytes[index] = len(timeline_markers.marker_lines(kept))
            slot = index % self.files
            self._slot_file[slot] = max(index, self._slot_file.get(slot, slot))
        self._type_written = (
            timeline_markers.read_marker_type(self.storage, self.instant_time) is not None
        )

    def _file_of(self, slot: int) -> int:
        """The file `slot` writes its next batch to: a new one once the current is full and
        must be rewritten whole."""
        index = self._slot_file.get(slot, slot)
        if not self.storage.appends and self._file_bytes.get(index, 0) >= ROLLOVER_BYTES:
            index += self.files
        self._slot_file[slot] = index
        return index

    def idle(self) -> bool:
        """Nothing waits to be written: forgetting the state loses no marker."""
        return not self._pending and not self._busy and not self._dispatching

    def count(self) -> int:
        """Markers stored or waiting to be (a name asked for twice may count twice)."""
        return len(self.all) + len(self._pending)

    def pending_names(self) -> set[str]:
        return {name for name, _ in self._pending}

    # Creating ---------------------------------------------------------------------------------

    async def create(self, name: str) -> bool:
        """Add a marker; True once it is on storage, False when it was there already."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._pending.append((name, future))
        if not self._dispatching:
            self._dispatching = True
            task = loop.create_task(self._dispatch())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _dispatch(self) -> None:
        try:
            while self._pending:
                await asyncio.sleep(self.interval)
                slot = self._free_slot()
                if slot is None:
                    continue  # every file is being written: the next round takes the batch
                batch, self._pending = self._pending, []
                task = asyncio.get_running_loop().create_task(self._process(batch, slot))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            self._dispatching = False

    def _free_slot(self) -> int | None:
        for step in range(1, self.files + 1):
            slot = (self._last_slot + step) % self.files
            if slot not in self._busy:
                self._busy.add(slot)
                self._last_slot = slot
                return slot
        return None

    async def _process(self, batch: list[tuple[str, asyncio.Future[bool]]], slot: int) -> None:
        index = self._file_of(slot)
        added: list[str] = []
        results: list[tuple[asyncio.Future[bool], bool]] = []
        kept = self._file_markers.setdefault(index, [])
        for name, future in batch:
            new = name not in self.all
            if new:
                self.all.add(name)
                kept.append(name)
                added.append(name)
            results.append((future, new))
        whole = [] if self.storage.appends else list(kept)
        write = _Write(partial(self._write, index, added, whole))
        try:
            await call_storage_async(self.calls, write)
        except Exception as exc:
            log.error(
                "writing markers of instant %s (MARKERS%d) failed: %s",
                self.instant_time,
                index,
                exc,
            )
            for name in added:  # not on storage: a retry must be able to add them again
                self.all.discard(name)
                kept.remove(name)
            for future, _ in results:
                if not future.done():
                    future.set_exception(exc)
            # A write still running keeps its slot until storage answers: a later batch
            # must not race it.
            loop = asyncio.get_running_loop()
            write.after(lambda: loop.call_soon_threadsafe(self._busy.discard, slot))
            return
        self._file_bytes[index] = self._file_bytes.get(index, 0) + len(
            timeline_markers.marker_lines(added)
        )
        self._busy.discard(slot)
        metrics.MARKERS_CREATED.inc(len(added))
        for future, new in results:
            if not future.done():
                future.set_result(new)


class _Write:
    """A write of marker files on a storage thread that says when it is over: at once when it
    never started (no storage slot in time) or once storage answered, whether or not its
    caller still waits."""

    def __init__(self, write: Callable[[], None]) -> None:
        self._write = write
        self._lock = threading.Lock()
        self._state = "waiting"  # -> "running" -> "over"; or -> "abandoned"
        self._after: Callable[[], object] | None = None

    def __call__(self) -> None:
        with self._lock:
            if self._state != "waiting":
                return  # abandoned before it started: it never touches storage
            self._state = "running"
        try:
            self._write()
        finally:
            with self._lock:
                self._state = "over"
                after = self._after
            if after is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    after()

    def after(self, callback: Callable[[], object]) -> None:
        """`callback` once the write is over (now, when it is over or never started)."""
        with self._lock:
            if self._state == "running":
                self._after = callback
                return
            self._state = "abandoned" if self._state == "waiting" else self._state
        callback()
