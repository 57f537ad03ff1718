"""Early conflict detection (RFC-56) on markers, as Hudi's timeline-server-based strategy
checks it (`MarkerBasedEarlyConflictDetectionRunnable`): shared by the marker server, which
refuses a writer's marker, and by our compaction and clustering, which yield to writers.

A writer's file groups (those its markers name) conflict with
- another writer in flight: a write pending on the timeline, requested before this one, that
  is not a pending compaction or clustering (writers never yield to table services), with a
  live heartbeat, whose markers name one of the file groups;
- a write that completed after this one started: a completed commit, delta commit or
  replacecommit whose write stats name one of the file groups, completed after the writer's
  instant time (its completion time in timeline layout 2; in layout 1, which records none,
  requested after it or not yet completed when the writer's first marker was seen).

Hudi compares `partition/fileId` cut from the marker name at its first `_`; here the file
name is parsed, so log files (`.fileId_…`) and partition paths holding `_` compare right.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, MutableMapping
from dataclasses import dataclass

from tms.hudi.files.markers import Marker, list_markers
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.storage import Storage
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Instant
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline

__all__ = [
    "FileGroupId",
    "WriterConflict",
    "file_group_of",
    "live_writers",
    "marked_file_groups",
    "writer_conflicts",
]

FileGroupId = tuple[str, str]
"""(partition path, file id)."""


@dataclass(frozen=True)
class WriterConflict:
    """Another instant writing, or having written, some of the same file groups."""

    instant: str
    in_flight: bool
    file_groups: tuple[FileGroupId, ...]

    def describe(self) -> str:
        groups = ", ".join(f"{p}/{f}" if p else f for p, f in self.file_groups[:5])
        more = f" and {len(self.file_groups) - 5} more" if len(self.file_groups) > 5 else ""
        state = "being written by" if self.in_flight else "written by"
        return f"file groups {groups}{more} {state} instant {self.instant}"


def file_group_of(marker: Marker) -> FileGroupId | None:
    """The file group a marker's data file belongs to; None for a name that is neither a
    base file nor a log file."""
    parsed = BaseFileName.parse(marker.file_name) or LogFileName.parse(marker.file_name)
    return (marker.partition_path, parsed.file_id) if parsed is not None else None


def marked_file_groups(markers: Iterable[Marker]) -> set[FileGroupId]:
    return {group for marker in markers if (group := file_group_of(marker)) is not None}


def live_writers(
    storage: Storage,
    timeline: Timeline,
    before: str,
    *,
    tolerance_seconds: float,
) -> list[str]:
    """Hudi's candidate instants: writes pending on the timeline (not a compaction or
    clustering), requested before `before`, whose heartbeat beat within `tolerance_seconds`.

    Hudi lists the marker folders instead; a folder whose instant is not pending on the
    timeline belongs to no writer in flight, so reading the timeline gives the same writers
    at a cost that grows with the writers in flight, not with the folders ever left behind."""
    return [
        instant.requested_time
        for instant in timeline.pending_writes()
        if instant.requested_time < before
        and heartbeat.is_alive(
            storage, instant.requested_time, tolerance_seconds, tolerable_misses=1
        )
    ]


def writer_conflicts(
    storage: Storage,
    timeline: Timeline,
    instant_time: str,
    file_groups: Collection[FileGroupId],
    *,
    tolerance_seconds: float,
    known_completed: Collection[str] | None = None,
    markers_of: Callable[[str], set[FileGroupId]] | None = None,
    written_cache: MutableMapping[str, set[FileGroupId]] | None = None,
) -> list[WriterConflict]:
    """Conflicts of the writer at `instant_time` whose markers name `file_groups`.

    `markers_of` gives another instant's marked file groups (default: its markers on
    storage, both forms); `written_cache` keeps completed instants' written file groups
    across calls (completed metadata never changes)."""
    ours = set(file_groups)
    if not ours:
        return []
    marked = markers_of or (lambda ts: marked_file_groups(list_markers(storage, ts)))
    found: list[WriterConflict] = []
    for ts in live_writers(storage, timeline, instant_time, tolerance_seconds=tolerance_seconds):
        touched = marked(ts) & ours
        if touched:
            found.append(WriterConflict(ts, True, tuple(sorted(touched))))
    for instant in timeline.completed(WRITE_COMMIT_ACTIONS):
        if not _completed_after(instant, instant_time, known_completed):
            continue
        key = instant.requested_time
        written = written_cache.get(key) if written_cache is not None else None
        if written is None:
            metadata = timeline.commit_metadata(instant)
            written = {
                (partition, file_id)
                for partition, ids in metadata.file_ids_by_partition().items()
                for file_id in ids
            }
            if written_cache is not None:
                written_cache[key] = written
        touched = written & ours
        if touched:
            found.append(WriterConflict(key, False, tuple(sorted(touched))))
    return found


def _completed_after(
    instant: Instant, instant_time: str, known_completed: Collection[str] | None
) -> bool:
    if instant.requested_time == instant_time:
        return False
    if instant.completion_time is not None:
        return instant.completion_time > instant_time
    if instant.requested_time > instant_time:
        return True
    return known_completed is not None and instant.requested_time not in known_completed
