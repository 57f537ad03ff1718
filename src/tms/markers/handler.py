"""Timeline-server markers of the tables this instance owns: the state of each instant
(`tms.markers.state`), early conflict detection on creation (RFC-56,
`tms.hudi.files.write_conflicts`), reading, and deleting an instant's markers.

Early conflict detection runs on each marker a writer asks for with it (Hudi's client then
sends `basepath`), synchronously rather than on Hudi's periodic thread, over the writer's
markers so far plus the new one; markers of one instant asking at once share a run that
started after they asked (`_Detections`). Once an instant conflicts, every later marker it
asks for with detection is refused too, as Hudi's strategy keeps its conflict flag. When
detection itself fails (storage unreadable), the marker is created, as Hudi does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tms import metrics
from tms.blocking_calls import BlockingCalls
from tms.http.storage_calls import call_storage_async
from tms.hudi.errors import HudiError
from tms.hudi.files.markers import MarkerType, list_markers, marker_dir, parse_marker_name
from tms.hudi.files.write_conflicts import (
    FileGroupId,
    WriterConflict,
    file_group_of,
    marked_file_groups,
    writer_conflicts,
)
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline
from tms.markers.refusals import refused
from tms.markers.state import MarkerDirState

__all__ = ["MarkerHandler", "MarkerLimits", "ServedTable"]

log = logging.getLogger(__name__)

WRITTEN_CACHE_INSTANTS = 4096
"""Completed instants per table whose written file groups stay cached."""
HELD_INSTANTS = 1024
"""Instants whose markers stay in memory; the least recently used idle ones leave (their
markers are on storage: a later request reads them back)."""
WRITER_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT})
"""Instants only writers run; any other pending instant may be a plan tms runs."""
TABLE_CONFIG_SECONDS = 60.0
"""How long a table's `hoodie.properties` is trusted before it is read again (an upgrade
moves the timeline)."""


@dataclass
class _Detections:
    """Early conflict detection of one instant, one run at a time: a marker asking while a
    run goes on waits for it, then takes the result of a run that started after it asked
    (its own, or one a marker queued behind it made), so a Spark stage's burst of markers
    costs one storage scan per run rather than one per marker."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    asked: int = 0
    """Markers that asked so far."""
    covered: int = 0
    """Markers that had asked when the last run started: `found` answers them."""
    found: list[WriterConflict] = field(default_factory=list)


@dataclass(frozen=True)
class MarkerLimits:
    """What one instance accepts on the open marker routes (settings `marker_name_max_chars`,
    `markers_per_instant_max`, `marker_instants_per_table_max`)."""

    name_chars: int = 1024
    per_instant: int = 500_000
    instants_per_table: int = 256


@dataclass(frozen=True)
class ServedTable:
    """A registered table, as its markers are served: its normalized base path and the
    options its storage needs."""

    base_path: str
    storage_options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


class MarkerHandler:
    """In-memory marker state of the tables served here, by (base path, instant)."""

    def __init__(
        self,
        *,
        batch_files: int,
        batch_interval_seconds: float,
        heartbeat_tolerance: float,
        storage_calls: BlockingCalls,
        limits: MarkerLimits | None = None,
    ) -> None:
        self._calls = storage_calls
        self.limits = limits or MarkerLimits()
        self._admitted: dict[str, dict[str, bool]] = {}
        """Instants per table admitted for marker creation (`admit`), and whether each is a
        table service's."""
        self._files = batch_files
        self._interval = batch_interval_seconds
        self._tolerance = heartbeat_tolerance
        self._states: OrderedDict[tuple[str, str], MarkerDirState] = OrderedDict()
        self._loads: dict[tuple[str, str], asyncio.Future[None]] = {}
        self._groups: dict[tuple[str, str], set[FileGroupId]] = {}
        self._detections: dict[tuple[str, str], _Detections] = {}
        self._tables: dict[str, tuple[HudiTable, float]] = {}
        self._written: dict[str, OrderedDict[str, set[FileGroupId]]] = {}

    # State ----------------------------------------------------------------------------------

    async def _state(self, table: ServedTable, instant_time: str) -> MarkerDirState:
        key = (table.base_path, instant_time)
        load = self._loads.get(key)
        if load is None:
            hudi = await self._table(table)
            load = self._loads.get(key)  # another request may have made it meanwhile
            if load is None:
                created = MarkerDirState(
                    hudi.storage,
                    instant_time,
                    files=self._files,
                    interval_seconds=self._interval,
                    storage_calls=self._calls,
                )
                self._states[key] = created
                load = asyncio.ensure_future(call_storage_async(self._calls, created.load))
                self._loads[key] = load
                self._evict()
        state = self._states[key]
        self._states.move_to_end(key)
        try:
            await asyncio.shield(load)
        except Exception:
            if self._loads.get(key) is load:
                self._forget(key)
            raise
        return state

    def _evict(self) -> None:
        for key in list(self._states)[: max(0, len(self._states) - HELD_INSTANTS)]:
            if self._states[key].idle():
                self._forget(key)

    async def _table(self, table: ServedTable) -> HudiTable:
        held = self._tables.get(table.base_path)
        now = time.monotonic()
        if held is None or now - held[1] > TABLE_CONFIG_SECONDS:
            hudi = await call_storage_async(
                self._calls, partial(HudiTable.open, table.base_path, table.storage_options or None)
            )
            self._tables[table.base_path] = (hudi, now)
            return hudi
        return held[0]

    def _forget(self, key: tuple[str, str]) -> None:
        self._states.pop(key, None)
        self._loads.pop(key, None)
        self._groups.pop(key, None)
        self._detections.pop(key, None)

    def drop_tables(self, base_paths: set[str]) -> None:
        """Forget what is held of these tables (another instance may serve them now)."""
        for key in [k for k in self._states if k[0] in base_paths]:
            self._forget(key)
        for base_path in base_paths:
            self._tables.pop(base_path, None)
            self._written.pop(base_path, None)
            self._admitted.pop(base_path, None)

    # Admission --------------------------------------------------------------------------------

    def admitted(self, key: tuple[str, str]) -> bool | None:
        """For (base path, instant) admitted for marker creation: whether it is a table
        service's instant (compaction, clustering, …: tms may take it over, so who runs it is
        asked again on each marker); None when not admitted."""
        return self._admitted.get(key[0], {}).get(key[1])

    async def pending_instant(self, table: ServedTable, instant_time: str) -> Instant | None:
        """The instant when it is requested or inflight on the table's timeline (read now)."""
        return (await self._pending_instants(table)).get(instant_time)

    async def is_pending(self, table: ServedTable, instant_time: str) -> bool:
        return await self.pending_instant(table, instant_time) is not None

    async def _pending_instants(self, table: ServedTable) -> dict[str, Instant]:
        hudi = await self._table(table)

        def pending() -> dict[str, Instant]:
            timeline = Timeline.load(hudi.storage, hudi.config)
            return {i.requested_time: i for i in timeline.instants if i.is_pending}

        return await call_storage_async(self._calls, pending)

    async def admit(self, table: ServedTable, instant: Instant) -> None:
        """Admit a pending instant for marker creation, within `instants_per_table`; when the
        table is at its limit, instants no longer pending leave first."""
        admitted = self._admitted.setdefault(table.base_path, {})
        if len(admitted) >= self.limits.instants_per_table:
            pending = await self._pending_instants(table)
            for ts in [ts for ts in admitted if ts not in pending]:
                del admitted[ts]
        if len(admitted) >= self.limits.instants_per_table:
            raise refused(
                "limit",
                f"the table has {len(admitted)} pending instants with markers here "
                f"(marker_instants_per_table_max {self.limits.instants_per_table})",
            )
        admitted[instant.requested_time] = instant.action not in WRITER_ACTIONS

    # Requests -------------------------------------------------------------------------------

    async def create(
        self, table: ServedTable, instant_time: str, name: str, *, detect: bool
    ) -> bool:
        """Create a marker: True when it is new and stored, False when it existed already or
        early conflict detection (`detect`) refused it."""
        if len(name) > self.limits.name_chars:
            raise refused(
                "limit",
                f"is {len(name)} characters long (marker_name_max_chars {self.limits.name_chars})",
                field="markername",
            )
        state = await self._state(table, instant_time)
        if name not in state.all and state.count() >= self.limits.per_instant:
            raise refused(
                "limit",
                f"instant {instant_time} holds {state.count()} markers "
                f"(markers_per_instant_max {self.limits.per_instant})",
            )
        group = file_group_of(parse_marker_name(name, "markername"))
        if detect and name not in state.all:
            if state.conflicted:
                return False
            if group is not None:
                self._groups_of(table, state).add(group)
            found = await self._detect(table, state)
            if found:
                state.conflicted = True
                metrics.MARKER_CONFLICTS.inc()
                log.warning(
                    "early conflict detection refused marker %s of instant %s on %s: %s",
                    name,
                    instant_time,
                    table.base_path,
                    "; ".join(c.describe() for c in found),
                )
                return False
        created = await state.create(name)
        if created and group is not None:
            self._groups_of(table, state).add(group)
        return created

    async def all_markers(self, table: ServedTable, instant_time: str) -> set[str]:
        return set((await self._state(table, instant_time)).all)

    async def markers_of_type(
        self, table: ServedTable, instant_time: str, types: set[MarkerType]
    ) -> set[str]:
        suffixes = tuple(f".marker.{t.value}" for t in types)
        return {m for m in await self.all_markers(table, instant_time) if m.endswith(suffixes)}

    async def exists(self, table: ServedTable, instant_time: str) -> bool:
        hudi = await self._table(table)
        return await call_storage_async(
            self._calls, partial(hudi.storage.exists, marker_dir(instant_time))
        )

    async def delete(self, table: ServedTable, instant_time: str) -> bool:
        """Delete the instant's marker folder once the instant is no longer pending
        (completed, rolled back or aborted), as Hudi's writer asks after finishing: True when
        there was one. A pending instant's folder stays (False): its writer, or a rollback of
        it, still needs the markers."""
        if await self.is_pending(table, instant_time):
            metrics.MARKERS_REFUSED.labels("dir_delete_pending").inc()
            log.warning(
                "refused to delete the markers of instant %s on %s: it is still pending",
                instant_time,
                table.base_path,
            )
            return False
        hudi = await self._table(table)
        self._forget((table.base_path, instant_time))
        self._admitted.get(table.base_path, {}).pop(instant_time, None)

        def delete() -> bool:
            path = marker_dir(instant_time)
            existed = hudi.storage.exists(path)
            hudi.storage.delete_dir(path)
            return existed

        return await call_storage_async(self._calls, delete)

    # Early conflict detection ---------------------------------------------------------------

    def _groups_of(self, table: ServedTable, state: MarkerDirState) -> set[FileGroupId]:
        key = (table.base_path, state.instant_time)
        groups = self._groups.get(key)
        if groups is None:
            groups = set()
            for name in state.all | state.pending_names():
                try:
                    marker = parse_marker_name(name, f"markers of instant {state.instant_time}")
                except HudiError:
                    continue
                if (group := file_group_of(marker)) is not None:
                    groups.add(group)
            self._groups[key] = groups
        return groups

    async def _detect(self, table: ServedTable, state: MarkerDirState) -> list[WriterConflict]:
        """Conflicts of the instant's file groups, from a run that started after this call
        (`_Detections`)."""
        key = (table.base_path, state.instant_time)
        detections = self._detections.setdefault(key, _Detections())
        detections.asked += 1
        ticket = detections.asked
        async with detections.lock:
            if detections.covered < ticket:
                detections.covered = detections.asked
                detections.found = await self._run_detection(table, state)
            return detections.found

    async def _run_detection(
        self, table: ServedTable, state: MarkerDirState
    ) -> list[WriterConflict]:
        hudi = await self._table(table)
        ours = frozenset(self._groups_of(table, state))
        held = {
            ts: frozenset(self._groups_of(table, other))
            for (base, ts), other in self._states.items()
            if base == table.base_path and ts < state.instant_time and ts in self._loaded(base)
        }
        written = self._written.setdefault(table.base_path, OrderedDict())

        def detect() -> list[WriterConflict]:
            timeline = Timeline.load(hudi.storage, hudi.config)
            if state.known_completed is None:
                state.known_completed = frozenset(
                    i.requested_time for i in timeline.completed(WRITE_COMMIT_ACTIONS)
                )

            def markers_of(ts: str) -> set[FileGroupId]:
                if ts in held:
                    return set(held[ts])
                return marked_file_groups(list_markers(hudi.storage, ts))

            found = writer_conflicts(
                hudi.storage,
                timeline,
                state.instant_time,
                ours,
                tolerance_seconds=self._tolerance,
                known_completed=state.known_completed,
                markers_of=markers_of,
                written_cache=written,
            )
            while len(written) > WRITTEN_CACHE_INSTANTS:
                written.popitem(last=False)
            return found

        try:
            return await call_storage_async(self._calls, detect)
        except Exception as exc:
            log.warning(
                "early conflict detection failed for instant %s on %s (%s); the marker is "
                "created without it",
                state.instant_time,
                table.base_path,
                exc,
            )
            return []

    def _loaded(self, base_path: str) -> set[str]:
        return {
            ts
            for (base, ts), load in self._loads.items()
            if base == base_path and load.done() and not load.exception()
        }
