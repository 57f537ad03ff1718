"""Per-table file-system views kept in memory, least recently used tables leaving first.

A table is listed once, when first asked for. Afterwards it is advanced, not rebuilt: the
store's row of the table changes whenever a commit of it is recorded (`last_commit_seen_at`,
set by every instance's callbacks and by the pull fallback), and so do the table's latest
operations when tms plans a compaction or clustering (a pending clustering changes neither
the commits nor the client's timeline hash); the request that looks the table up by its base
path reads them anyway, so telling whether the view is current costs no extra storage call.
When it is not (or the client's `timelinehash` shows a timeline the view has not seen), the
timeline is listed again and only what changed is applied (`tms.view.listing`): files named
by new commits' metadata, partitions of cleans and rollbacks listed again, the whole table
after a restore.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Instant
from tms.hudi.timeline.timeline import Timeline
from tms.view.completion_times import CompletionTimes, load_timeline
from tms.view.listing import Change, Listing, changes_between, list_table, touched_partitions
from tms.view.snapshot import Snapshot, build_snapshot

__all__ = ["CachedTable", "TableRef", "ViewCache"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableRef:
    """A registered table as the store knows it, with the token of its newest commit."""

    id: int
    base_path: str
    storage_options: Mapping[str, Any]
    token: str
    """When the store last recorded a new commit of the table (ISO time, '' for never):
    it only grows."""
    plans: str = ""
    """The table's latest operations as the store has them (id, instant, status): changes
    when tms schedules a plan, which no commit announces and a pending clustering does not
    change the client's timeline hash either."""


@dataclass
class CachedTable:
    """One table's view and what keeps it current."""

    ref: TableRef
    storage: Storage
    table: HudiTable
    timeline: Timeline
    listing: Listing
    snapshot: Snapshot
    token: str
    plans: str
    replace_metadata: dict[str, ReplaceCommitMetadata | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while the view advances."""
    sync_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held by a client-asked sync from its decision to its end: a request that arrives
    meanwhile waits for it and is answered from what it found."""
    synced_at: float | None = None
    """When (monotonic seconds) a client's request last had the view synced."""
    sync_found_change: bool = False
    """Whether that sync found the timeline changed (a table on the move may sync again)."""
    completion_times: CompletionTimes = field(default_factory=dict)
    """Of the timeline's completed instants, on layout 1 (`completion_times`)."""


@dataclass
class Outcome:
    """How a request's view was obtained (metric labels and counts)."""

    cache: str = "hit"
    """hit (current), miss (built: listed), advanced (store said newer), synced (client's
    timeline said newer)."""
    listings: int = 0
    """Storage listings this request made (timeline and partitions)."""


class ViewCache:
    """At most `max_tables` tables' views, least recently used leaving first."""

    def __init__(self, max_tables: int) -> None:
        self.max_tables = max_tables
        self._tables: OrderedDict[int, CachedTable] = OrderedDict()
        self._lock = threading.Lock()
        self._building: dict[int, threading.Lock] = {}

    def __len__(self) -> int:
        return len(self._tables)

    def get(self, ref: TableRef, outcome: Outcome) -> CachedTable:
        """The table's view, built when absent and advanced when the store knows of newer
        commits than it has applied."""
        with self._lock:
            cached = self._tables.get(ref.id)
            if cached is not None and _same_location(cached.ref, ref):
                self._tables.move_to_end(ref.id)
            else:
                cached = None
            building = self._building.setdefault(ref.id, threading.Lock())
        if cached is None:
            with building:  # one build per table at a time; the others wait and reuse it
                with self._lock:
                    cached = self._tables.get(ref.id)
                if cached is None or not _same_location(cached.ref, ref):
                    cached = self._build(ref, outcome)
                    self._store(cached)
                    return cached
        if ref.token > cached.token or ref.plans != cached.plans:
            self.advance(cached, ref.token, outcome, reason="advanced", plans=ref.plans)
        return cached

    def drop(self, table_id: int) -> None:
        with self._lock:
            self._tables.pop(table_id, None)

    def _store(self, cached: CachedTable) -> None:
        with self._lock:
            self._tables[cached.ref.id] = cached
            self._tables.move_to_end(cached.ref.id)
            while len(self._tables) > self.max_tables:
                evicted, _ = self._tables.popitem(last=False)
                self._building.pop(evicted, None)

    def _build(self, ref: TableRef, outcome: Outcome) -> CachedTable:
        table = HudiTable.open(ref.base_path, ref.storage_options)
        storage = table.storage
        timeline, times = load_timeline(table)
        listing = list_table(storage)
        outcome.cache = "miss"
        outcome.listings += 1 + listing.listed
        cached = CachedTable(
            ref=ref,
            storage=storage,
            table=table,
            timeline=timeline,
            listing=listing,
            snapshot=None,  # type: ignore[arg-type]  # set just below
            token=ref.token,
            plans=ref.plans,
            completion_times=times,
        )
        cached.snapshot = self._snapshot(cached, timeline)
        log.info(
            "view of %s built: %d partitions, %d listings",
            ref.base_path,
            len(listing.partitions),
            outcome.listings,
        )
        return cached

    def advance(
        self,
        cached: CachedTable,
        token: str,
        outcome: Outcome,
        reason: str,
        *,
        plans: str | None = None,
        force: bool = False,
    ) -> None:
        """Load the timeline again and apply what changed (under the table's lock); `token`
        and `plans` are the store's, read before: the view then holds every commit and plan
        they name. Unless `force`, a view already at them is left as it is."""
        with cached.lock:
            same_plans = plans is None or plans == cached.plans
            if not force and cached.token >= token and same_plans:
                return  # another request advanced it meanwhile
            before = cached.listing.listed
            timeline, times = load_timeline(cached.table)
            outcome.listings += 1
            change = changes_between(cached.timeline, timeline)
            changed = None if change.rebuild else self._apply(cached, timeline, change)
            if changed is None:
                cached.listing = list_table(cached.storage)
                outcome.listings += cached.listing.listed
            else:
                outcome.listings += cached.listing.listed - before
            previous = cached.snapshot
            cached.timeline = timeline
            cached.completion_times = times
            cached.snapshot = self._snapshot(cached, timeline, previous, changed)
            if token > cached.token:
                cached.token = token
            if plans is not None:
                cached.plans = plans
            if outcome.cache != "miss":
                outcome.cache = reason

    @staticmethod
    def _apply(cached: CachedTable, timeline: Timeline, change: Change) -> set[str] | None:
        """Apply new writes and re-list the partitions cleans and rollbacks touched: the
        partitions changed, or None when something could not be read (the caller lists the
        whole table)."""
        listing = cached.listing
        changed: set[str] = set()
        try:
            for instant in change.written:
                metadata = timeline.commit_metadata(instant)
                written = listing.add_written(metadata)
                if written is None:
                    written = listing.relist(cached.storage, metadata.partitions())
                changed |= written
            for instant in change.relist:
                partitions = touched_partitions(timeline, instant)
                if partitions is None:
                    return None
                changed |= listing.relist(cached.storage, partitions)
        except (OSError, ValueError, KeyError) as exc:
            log.warning("view of %s: listing again after %s", cached.ref.base_path, exc)
            return None
        return changed

    @staticmethod
    def _snapshot(
        cached: CachedTable,
        timeline: Timeline,
        previous: Snapshot | None = None,
        changed: set[str] | None = None,
    ) -> Snapshot:
        def replace_metadata(instant: Instant) -> ReplaceCommitMetadata | None:
            key = instant.requested_time
            if key not in cached.replace_metadata:
                try:
                    found = timeline.commit_metadata(instant)
                except FileNotFoundError:
                    found = None  # archived meanwhile, as Hudi skips it
                cached.replace_metadata[key] = (
                    found if isinstance(found, ReplaceCommitMetadata) else None
                )
            return cached.replace_metadata[key]

        return build_snapshot(
            timeline,
            cached.listing.files(),
            replace_metadata,
            previous=previous,
            changed=changed,
            completion_times=cached.completion_times,
        )


def _same_location(cached: TableRef, ref: TableRef) -> bool:
    """The cached view is of the table as registered now (an admin may move it or change
    its storage options)."""
    return cached.base_path == ref.base_path and cached.storage_options == ref.storage_options
