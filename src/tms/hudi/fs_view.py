"""The file-system view: file groups and file slices as of the latest completed instant.

A base file counts once its instant completed; log files count when the slice they name is
committed or belongs to a pending compaction (writers append to the compaction's new slice);
file groups replaced by a completed replacecommit are gone.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.commit_metadata import ReplaceCommitMetadata
from tms.hudi.filenames import PARTITION_METADATA, BaseFileName, LogFileName
from tms.hudi.instant import Action
from tms.hudi.storage import FileInfo, Storage
from tms.hudi.timeline import Timeline


@dataclass(frozen=True)
class BaseFile:
    name: BaseFileName
    path: str
    """Relative to the base path."""
    size: int

    @property
    def file_name(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class LogFile:
    name: LogFileName
    path: str
    size: int

    @property
    def file_name(self) -> str:
        return str(self.name)


@dataclass(frozen=True)
class FileSlice:
    """A base file (absent while its compaction is pending) and the log files written after it."""

    partition_path: str
    file_id: str
    base_instant_time: str
    base_file: BaseFile | None = None
    log_files: tuple[LogFile, ...] = ()

    @property
    def has_log_files(self) -> bool:
        return bool(self.log_files)

    @property
    def log_size(self) -> int:
        return sum(log.size for log in self.log_files)

    @property
    def total_size(self) -> int:
        return (self.base_file.size if self.base_file else 0) + self.log_size

    @property
    def paths(self) -> list[str]:
        base = [self.base_file.path] if self.base_file else []
        return base + [log.path for log in self.log_files]

    def describe(self) -> dict[str, Any]:
        return {
            "partition": self.partition_path,
            "file_id": self.file_id,
            "base_instant": self.base_instant_time,
            "base_file": self.base_file.file_name if self.base_file else None,
            "base_file_size": self.base_file.size if self.base_file else 0,
            "log_files": [log.file_name for log in self.log_files],
            "log_size": self.log_size,
        }


@dataclass(frozen=True)
class FileGroup:
    partition_path: str
    file_id: str
    slices: tuple[FileSlice, ...]
    """Oldest first."""

    @property
    def latest_slice(self) -> FileSlice:
        return self.slices[-1]


@dataclass(frozen=True)
class FileSystemView:
    timeline: Timeline
    partitions: tuple[str, ...]
    file_groups: tuple[FileGroup, ...]
    replaced_file_ids: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    """(partition, file id) of every file group a completed replacecommit replaced."""

    @classmethod
    def build(cls, storage: Storage, timeline: Timeline) -> FileSystemView:
        partitions = tuple(sorted(list_partitions(storage)))
        replaced = replaced_file_groups(timeline)
        pending_compaction = {i.requested_time for i in timeline.pending_compactions()}
        earliest = timeline.instants[0].requested_time if timeline.instants else ""

        def committed(ts: str) -> bool:
            instant = timeline.get(ts)
            if instant is None:
                return bool(earliest) and ts < earliest  # archived long ago
            return instant.is_completed

        groups: list[FileGroup] = []
        for partition in partitions:
            groups += _partition_file_groups(
                storage, partition, committed, pending_compaction, replaced
            )
        return cls(timeline, partitions, tuple(groups), frozenset(replaced))

    def groups_in(self, partition: str | None = None) -> list[FileGroup]:
        return [g for g in self.file_groups if partition is None or g.partition_path == partition]

    def latest_file_slices(self, partition: str | None = None) -> list[FileSlice]:
        return [g.latest_slice for g in self.groups_in(partition)]

    def latest_merged_file_slices(self, partition: str | None = None) -> list[FileSlice]:
        """Latest slices with a pending compaction's log-only slice merged into the one before.

        This is what a snapshot read must merge: the old base file, its logs, and the logs
        written against the compaction that has not completed yet.
        """
        merged: list[FileSlice] = []
        for group in self.groups_in(partition):
            latest = group.latest_slice
            if latest.base_file is None and len(group.slices) > 1:
                previous = group.slices[-2]
                latest = FileSlice(
                    previous.partition_path,
                    previous.file_id,
                    previous.base_instant_time,
                    previous.base_file,
                    previous.log_files + latest.log_files,
                )
            merged.append(latest)
        return merged

    def pending_compaction_file_ids(self) -> set[tuple[str, str]]:
        ids: set[tuple[str, str]] = set()
        for instant in self.timeline.pending_compactions():
            for op in self.timeline.compaction_plan(instant).get("operations") or []:
                ids.add((op.get("partitionPath") or "", op["fileId"]))
        return ids

    def pending_clustering_file_ids(self) -> set[tuple[str, str]]:
        ids: set[tuple[str, str]] = set()
        for instant in self.timeline.pending_clusterings():
            for group in self.timeline.clustering_plan(instant).get("inputGroups") or []:
                for piece in group.get("slices") or []:
                    ids.add((piece.get("partitionPath") or "", piece["fileId"]))
        return ids

    def describe(self) -> list[dict[str, Any]]:
        return [s.describe() for s in self.latest_file_slices()]


def list_partitions(storage: Storage) -> list[str]:
    """Relative paths of partitions: folders holding `.hoodie_partition_metadata` ('' = root)."""
    found: list[str] = []

    def visit(path: str) -> None:
        entries = storage.list_dir(path)
        if any(e.name == PARTITION_METADATA for e in entries):
            found.append(path)
        for entry in entries:
            if entry.is_dir and not entry.name.startswith("."):
                visit(entry.path)

    visit("")
    return found


def replaced_file_groups(timeline: Timeline) -> set[tuple[str, str]]:
    replaced: set[tuple[str, str]] = set()
    for instant in timeline.completed((Action.REPLACE_COMMIT,)):
        metadata = timeline.commit_metadata(instant)
        if not isinstance(metadata, ReplaceCommitMetadata):
            continue
        for partition, file_ids in metadata.partition_to_replace_file_ids.items():
            replaced.update((partition, file_id) for file_id in file_ids)
    return replaced


def _partition_file_groups(
    storage: Storage,
    partition: str,
    committed: Any,
    pending_compaction: set[str],
    replaced: set[tuple[str, str]],
) -> list[FileGroup]:
    bases: dict[str, dict[str, BaseFile]] = defaultdict(dict)
    logs: dict[str, dict[str, list[LogFile]]] = defaultdict(lambda: defaultdict(list))
    for entry in storage.list_dir(partition):
        if entry.is_dir:
            continue
        _classify(entry, partition, committed, pending_compaction, bases, logs)
    groups: list[FileGroup] = []
    for file_id in sorted(set(bases) | set(logs)):
        if (partition, file_id) in replaced:
            continue
        instants = sorted(set(bases[file_id]) | set(logs[file_id]))
        slices = tuple(
            FileSlice(
                partition,
                file_id,
                ts,
                bases[file_id].get(ts),
                tuple(sorted(logs[file_id].get(ts, []), key=lambda log: log.name.sort_key)),
            )
            for ts in instants
        )
        groups.append(FileGroup(partition, file_id, slices))
    return groups


def _classify(
    entry: FileInfo,
    partition: str,
    committed: Any,
    pending_compaction: set[str],
    bases: dict[str, dict[str, BaseFile]],
    logs: dict[str, dict[str, list[LogFile]]],
) -> None:
    path = posixpath.join(partition, entry.name) if partition else entry.name
    base_name = BaseFileName.parse(entry.name)
    if base_name is not None:
        if committed(base_name.instant_time):
            bases[base_name.file_id][base_name.instant_time] = BaseFile(base_name, path, entry.size)
        return
    log_name = LogFileName.parse(entry.name)
    if log_name is not None and (
        committed(log_name.base_instant_time) or log_name.base_instant_time in pending_compaction
    ):
        logs[log_name.file_id][log_name.base_instant_time].append(
            LogFile(log_name, path, entry.size)
        )
