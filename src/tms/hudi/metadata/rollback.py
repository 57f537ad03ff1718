"""Rolling back a metadata table delta commit whose data table instant did not commit.

Undoing a delta commit deletes the log files it wrote. Hudi 1.x names a metadata log file by
the delta commit that wrote it; on table version 6 (layout 1) a delta commit always writes new
log file versions, so deleting them leaves the slice as it was (Hudi 0.x, which may append to a
log file, writes a rollback command block instead; readers treat both alike).

The rollback is an instant of the metadata table's own timeline: a rollback plan
(requested), inflight, then completed with the rollback metadata; the rolled-back instant's
files leave the timeline. What to delete: the log files the commit metadata lists (completed),
the files the markers name that the instant wrote (a crash while writing;
`tms.hudi.files.marked_files`), and, in layout 2, any log file named by the instant.

Refused before anything is written: an instant the metadata table does not have, a data table
instant that completed (its metadata must stay), and a delta commit that a later compaction of
the metadata table has already folded into base files.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.marked_files import sort_marked_files
from tms.hudi.files.markers import delete_markers, list_markers
from tms.hudi.files.names import LogFileName
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.layout import TimelineLayout
from tms.hudi.timeline.rollback_instant import RollbackInstant
from tms.hudi.timeline.transitions import delete_pending, instant_file, new_instant_time

__all__ = ["MetadataRollback", "rollback_delta_commit"]


@dataclass(frozen=True)
class MetadataRollback:
    rollback_instant: str
    rolled_back: str
    deleted_files: tuple[str, ...]


def _files_of(reader: MetadataTableReader, instant: Instant) -> dict[str, list[str]]:
    """Log files the delta commit wrote, by metadata partition (paths relative to it)."""
    storage, timeline = reader.storage, reader.timeline
    found: dict[str, set[str]] = defaultdict(set)
    if instant.is_completed:
        for partition, path in (
            (p, s.path) for p, s in timeline.commit_metadata(instant).iter_write_stats()
        ):
            if path:
                found[partition].add(path)
    ts = instant.requested_time
    for marker in sort_marked_files(storage, ts, list_markers(storage, ts)).owned:
        found[marker.partition_path].add(marker.data_file_path)
    if not TimelineLayout.of(reader.config).names_completion_time:
        return {partition: sorted(paths) for partition, paths in sorted(found.items())}
    folders = [e.path for e in storage.list_dir("") if e.is_dir and not e.name.startswith(".")]
    for partition in folders:
        for entry in storage.list_dir(partition):
            name = LogFileName.parse(entry.name)
            if name is not None and name.base_instant_time == instant.requested_time:
                found[partition].add(entry.path)
    return {partition: sorted(paths) for partition, paths in sorted(found.items())}


def _refusals(reader: MetadataTableReader, instant: Instant | None, instant_time: str) -> list[str]:
    if instant is None or instant.action is not Action.DELTA_COMMIT:
        return [f"the metadata table has no delta commit {instant_time}"]
    reasons: list[str] = []
    if reader.data_timeline.is_completed(instant_time):
        reasons.append(f"the data table committed {instant_time}; its metadata must stay")
    folded = [
        c.requested_time
        for c in reader.timeline.instants
        if reader.timeline.is_compaction(c) and c.requested_time > instant_time
    ]
    if folded:
        reasons.append(f"metadata compaction {folded[0]} came after it")
    return reasons


def rollback_delta_commit(
    data_storage: Storage, instant_time: str, *, reader: MetadataTableReader | None = None
) -> MetadataRollback:
    """Undo the metadata table's delta commit `instant_time`, inflight or completed."""
    reader = reader or MetadataTableReader.open(data_storage)
    instant = reader.timeline.get(instant_time)
    reasons = _refusals(reader, instant, instant_time)
    if reasons or instant is None:
        raise UnsupportedTableError(
            f"cannot roll back metadata delta commit {instant_time}: " + "; ".join(reasons)
        )
    storage, config = reader.storage, reader.config
    rollback = RollbackInstant(
        storage,
        config,
        new_instant_time(reader.timeline.instants),
        (instant_time, Action.DELTA_COMMIT),
        _files_of(reader, instant),
    )
    rollback.start()
    if instant.is_completed:  # readers stop using it before its files go
        storage.delete(instant_file(config, instant))
    rollback.delete_files()
    delete_pending(storage, config, instant)
    rollback.complete()
    delete_markers(storage, instant_time)
    return MetadataRollback(rollback.rollback_time, instant_time, tuple(rollback.deleted))
