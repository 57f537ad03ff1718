"""The files of a table's partitions, listed once and then kept in step from the timeline.

A completed write (commit, delta commit, replacecommit, a compaction's or clustering's
commit) names every file it wrote in its commit metadata, with its size: those are added
without listing anything. A clean, rollback or restore deletes files: the partitions its
metadata names are listed again (all of them when it cannot be read). So a table that only
takes writes is listed once, when it is first asked for.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.files.fs_view import is_partition_metadata
from tms.hudi.storage import FileInfo, Storage
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline

__all__ = ["Change", "Listing", "changes_between", "list_table"]

RELIST_ACTIONS = frozenset({Action.CLEAN, Action.ROLLBACK})
"""Completed actions that delete files: their partitions are listed again."""
REBUILD_ACTIONS = frozenset({Action.RESTORE})
"""Completed actions after which the whole table is listed again."""


@dataclass
class Listing:
    """Per partition (relative path, '' for the root), its files by name."""

    partitions: dict[str, dict[str, FileInfo]] = field(default_factory=dict)
    listed: int = 0
    """Directory listings made to build and keep this listing."""

    def files(self) -> dict[str, list[FileInfo]]:
        return {p: list(files.values()) for p, files in self.partitions.items()}

    def add_written(self, metadata: CommitMetadata) -> set[str] | None:
        """Add the files a write names; the partitions it wrote, or None when a stat names
        no file (those partitions are listed instead)."""
        touched: set[str] = set()
        for partition, stat in metadata.iter_write_stats():
            if not stat.path:
                return None
            partition = stat.partition_path if stat.partition_path is not None else partition
            name = posixpath.basename(stat.path)
            path = posixpath.join(partition, name) if partition else name
            self.partitions.setdefault(partition, {})[name] = FileInfo(
                path, stat.file_size_in_bytes, False, 0.0
            )
            touched.add(partition)
        return touched

    def relist(self, storage: Storage, partitions: Iterable[str]) -> set[str]:
        """List these partitions again; one that is gone (or no partition) is dropped."""
        partitions = set(partitions)
        for partition in partitions:
            files = _partition_files(storage.list_dir(partition))
            self.listed += 1
            if files is not None:
                self.partitions[partition] = files
            else:
                self.partitions.pop(partition, None)
        return partitions


def _partition_files(entries: list[FileInfo]) -> dict[str, FileInfo] | None:
    """A folder's files by name when it is a partition (holds `.hoodie_partition_metadata`)."""
    files = {e.name: e for e in entries if not e.is_dir}
    return files if any(is_partition_metadata(name) for name in files) else None


def list_table(storage: Storage) -> Listing:
    """Every partition (a folder holding `.hoodie_partition_metadata`) with its files: one
    listing per folder, as `fs_view.list_partitions` walks them."""
    listing = Listing()

    def visit(path: str) -> None:
        entries = storage.list_dir(path)
        listing.listed += 1
        files = _partition_files(entries)
        if files is not None:
            listing.partitions[path] = files
        for entry in entries:
            if entry.is_dir and not entry.name.startswith("."):
                visit(entry.path)

    visit("")
    return listing


@dataclass(frozen=True)
class Change:
    """What moving from one timeline to the next does to the files."""

    written: list[Instant]
    """Completed writes whose metadata names the files they added."""
    relist: list[Instant]
    """Completed cleans and rollbacks: their partitions are listed again."""
    rebuild: bool
    """The whole table must be listed again (a restore, or completed instants vanished)."""


def changes_between(old: Timeline, new: Timeline) -> Change:
    old_completed = {(i.requested_time, i.action) for i in old.instants if i.is_completed}
    new_completed = [i for i in new.instants if i.is_completed]
    new_keys = {(i.requested_time, i.action) for i in new_completed}
    first = new.instants[0].requested_time if new.instants else ""
    vanished = [k for k in old_completed - new_keys if k[0] >= first]
    fresh = [i for i in new_completed if (i.requested_time, i.action) not in old_completed]
    return Change(
        written=[i for i in fresh if i.action in WRITE_COMMIT_ACTIONS],
        relist=[i for i in fresh if i.action in RELIST_ACTIONS],
        rebuild=bool(vanished) or any(i.action in REBUILD_ACTIONS for i in fresh),
    )


def touched_partitions(timeline: Timeline, instant: Instant) -> list[str] | None:
    """Partitions a clean or rollback names (`partitionMetadata`); None when unreadable."""
    try:
        metadata = timeline.avro_details(instant, State.COMPLETED)
    except (OSError, ValueError, KeyError):
        return None
    if metadata is None:
        return []
    partitions = metadata.get("partitionMetadata")
    if not isinstance(partitions, dict):
        return None
    return [str(p) for p in partitions]
