"""The file-system view: file groups and file slices as of the latest completed instant.

A base file counts once its instant completed; log files count when the slice they name is
committed or belongs to a pending compaction (writers append to the compaction's new slice);
file groups replaced by a completed replacecommit are gone. A file group that a pending
compaction plans to compact gets a new, empty slice at the compaction instant, as in Hudi, so
writers append to it instead of to the slice being compacted.

Timeline layout 2 (table version 8+) names a log file by the delta commit that wrote it, not by
its slice. Taking a file group's log files in delta commit order, as Hudi 1.x does
(`HoodieFileGroup.getBaseInstantTime`): the first log file of a group without a slice starts
one at its delta commit; otherwise a log file belongs to the latest slice whose base instant is
at or before its delta commit's completion time, or to the latest slice when that completion
time is unknown (a delta commit archived without history). So a delta commit requested before
a compaction but completed after it was requested writes into the compaction's new slice.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.files.names import PARTITION_METADATA, BaseFileName, LogFileName
from tms.hudi.storage import FileInfo, Storage
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import Timeline


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
class PartitionSlicer:
    """How a timeline turns a partition's files into file groups and slices: which instants
    committed, the slices pending compactions open, and the slice each log file belongs to
    (by completion time from timeline layout 2 on, by the instant in its name before). One
    rule for every view of the table: the file-system view and the timeline server's."""

    committed: Callable[[str], bool]
    pending_compaction: frozenset[str]
    pending_slices: dict[tuple[str, str], str]
    slice_of_log: SliceOfLog

    @classmethod
    def of(cls, timeline: Timeline) -> PartitionSlicer:
        earliest = timeline.instants[0].requested_time if timeline.instants else ""

        def committed(ts: str) -> bool:
            instant = timeline.get(ts)
            if instant is None:
                return bool(earliest) and ts < earliest  # archived long ago
            return instant.is_completed

        return cls(
            committed=committed,
            pending_compaction=frozenset(i.requested_time for i in timeline.pending_compactions()),
            pending_slices=_pending_compaction_slices(timeline),
            slice_of_log=(
                _slice_by_completion_time(timeline)
                if timeline.config.timeline_layout_version >= 2
                else _slice_named_by_log
            ),
        )

    def file_groups(
        self, storage: Storage, partition: str, replaced: set[tuple[str, str]] | None = None
    ) -> list[FileGroup]:
        """The file groups of `partition` as `storage` lists it, less the `replaced` ones."""
        return _partition_file_groups(
            storage,
            partition,
            self.committed,
            set(self.pending_compaction),
            replaced if replaced is not None else set(),
            self.pending_slices,
            self.slice_of_log,
        )


@dataclass(frozen=True)
class FileSystemView:
    timeline: Timeline
    partitions: tuple[str, ...]
    file_groups: tuple[FileGroup, ...]
    replaced_file_ids: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    """(partition, file id) of every file group a completed replacecommit replaced."""

    @classmethod
    def build(
        cls, storage: Storage, timeline: Timeline, partitions: Collection[str] | None = None
    ) -> FileSystemView:
        """The view of every partition, or only of `partitions` (those that exist), so a reader
        of one partition lists only that one."""
        if partitions is None:
            partitions = tuple(sorted(list_partitions(storage)))
        else:
            partitions = tuple(sorted(p for p in set(partitions) if storage.exists(p)))
        replaced = replaced_file_groups(timeline)
        slicer = PartitionSlicer.of(timeline)
        groups: list[FileGroup] = []
        for partition in partitions:
            groups += slicer.file_groups(storage, partition, replaced)
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
        pending = self.timeline.pending_compactions()
        return {(p, f) for _, p, f in compaction_plan_file_groups(self.timeline, pending)}

    def pending_log_compaction_file_ids(self) -> set[tuple[str, str]]:
        pending = self.timeline.pending((Action.LOG_COMPACTION,))
        return {(p, f) for _, p, f in compaction_plan_file_groups(self.timeline, pending)}

    def pending_clustering_file_ids(self) -> set[tuple[str, str]]:
        return {(p, f) for _, p, f in clustering_plan_file_groups(self.timeline)}

    def describe(self) -> list[dict[str, Any]]:
        return [s.describe() for s in self.latest_file_slices()]


PlannedFileGroup = tuple[Instant, str, str]
"""A file group a pending plan names: (the plan's instant, partition path, file id)."""


def compaction_plan_file_groups(
    timeline: Timeline, instants: Iterable[Instant]
) -> Iterator[PlannedFileGroup]:
    """The file groups the compaction plans at `instants` name (a compaction's or a log
    compaction's: the same plan)."""
    for instant in instants:
        for op in timeline.compaction_plan(instant).get("operations") or []:
            yield instant, op.get("partitionPath") or "", op["fileId"]


def clustering_plan_file_groups(timeline: Timeline) -> Iterator[PlannedFileGroup]:
    """The file groups every pending clustering plan names."""
    for instant in timeline.pending_clusterings():
        for group in timeline.clustering_plan(instant).get("inputGroups") or []:
            for piece in group.get("slices") or []:
                yield instant, piece.get("partitionPath") or "", piece["fileId"]


def list_partitions(storage: Storage) -> list[str]:
    """Relative paths of partitions: folders holding `.hoodie_partition_metadata` ('' = root)."""
    found: list[str] = []

    def visit(path: str) -> None:
        entries = storage.list_dir(path)
        if any(is_partition_metadata(e.name) for e in entries):
            found.append(path)
        for entry in entries:
            if entry.is_dir and not entry.name.startswith("."):
                visit(entry.path)

    visit("")
    return found


def is_partition_metadata(name: str) -> bool:
    """`.hoodie_partition_metadata`, or `.hoodie_partition_metadata.parquet|.orc` when Hudi
    writes it in the base file format (`hoodie.partition.metafile.use.base.format`)."""
    return name == PARTITION_METADATA or name in (
        f"{PARTITION_METADATA}.parquet",
        f"{PARTITION_METADATA}.orc",
    )


def _pending_compaction_slices(timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) of every file group a pending compaction plans, to its instant."""
    slices: dict[tuple[str, str], str] = {}
    for instant in timeline.pending_compactions():
        plan = timeline.avro_details(instant, State.REQUESTED) or {}
        for op in plan.get("operations") or []:
            if op.get("fileId"):
                slices[(op.get("partitionPath") or "", op["fileId"])] = instant.requested_time
    return slices


SliceOfLog = Callable[[str, Collection[str]], str]
"""(instant in a log file's name, base instants of its file group) -> its slice's instant."""


def _slice_named_by_log(log_instant: str, slice_instants: Collection[str]) -> str:
    """Layout 1: a log file names the base instant of its slice."""
    return log_instant


def _slice_by_completion_time(timeline: Timeline) -> SliceOfLog:
    """Layout 2: a log file names its delta commit; it belongs to the latest slice that starts
    at or before that delta commit's completion time (to the latest slice when it has none)."""

    def slice_of(delta_commit: str, slice_instants: Collection[str]) -> str:
        if not slice_instants:
            return delta_commit
        latest = max(slice_instants)
        completed = timeline.completion_time(delta_commit)
        if completed is None:
            return latest
        if len(completed) != len(latest):
            # Hudi's rule for times of other widths: compare the requested time instead.
            completed = delta_commit
        earlier = [ts for ts in slice_instants if ts <= completed]
        return max(earlier) if earlier else delta_commit

    return slice_of


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
    pending_slices: dict[tuple[str, str], str],
    slice_of_log: SliceOfLog,
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
        starts = set(bases[file_id])
        pending_at = pending_slices.get((partition, file_id))
        if pending_at is not None:
            starts.add(pending_at)
        slice_logs: dict[str, list[LogFile]] = defaultdict(list)
        for log_instant in sorted(logs[file_id]):
            start = slice_of_log(log_instant, starts)
            starts.add(start)  # later log files may belong to a slice a log file started
            slice_logs[start] += logs[file_id][log_instant]
        slices = tuple(
            FileSlice(
                partition,
                file_id,
                ts,
                bases[file_id].get(ts),
                tuple(sorted(slice_logs.get(ts, []), key=_log_order)),
            )
            for ts in sorted(starts | set(slice_logs))
        )
        groups.append(FileGroup(partition, file_id, slices))
    return groups


def _log_order(log: LogFile) -> tuple[str, tuple[int, str]]:
    """Write order: by the instant in the name (layout 2 mixes delta commits), version, token."""
    return (log.name.base_instant_time, log.name.sort_key)


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
