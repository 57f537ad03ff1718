"""One table's file-system view as Hudi's timeline server holds it, answered as Hudi answers.

Built from the timeline and the files of every partition (a listing, or the listing kept and
advanced by commit metadata, `tms.view.listing`). The file groups are those of
`tms.hudi.files.fs_view` (the same slicing, log placement and pending-compaction slices: its
steps, private there, are called here), but file groups a replacecommit replaced are kept,
as Hudi keeps them, with the instant that replaced them: most queries leave them out, the
`replaced` ones and the `beforeoron` ones (replaced after the asked instant) need them.
Slices and log files are listed newest first, as Hudi's `HoodieFileGroup` and `FileSlice`
hold them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.files.fs_view import (
    BaseFile,
    FileGroup,
    FileSlice,
    PartitionSlicer,
)
from tms.hudi.files.names import BaseFileName
from tms.hudi.storage import FileInfo, Storage
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import Timeline
from tms.view.completion_times import CompletionTimes, with_completion_times
from tms.view.visible_timeline import timeline_hash, visible_instants, write_instants

__all__ = ["FileGroupId", "PendingOperation", "Snapshot", "build_snapshot"]

FileGroupId = tuple[str, str]
"""(partition path, file id), Hudi's `HoodieFileGroupId`."""
ReplaceMetadataOf = Callable[[Instant], ReplaceCommitMetadata | None]
MEMO_ANSWERS = 512
"""Encoded answers kept per snapshot, at most."""
MEMO_BYTES = 8 * 1024 * 1024
"""Bytes of encoded answers kept per snapshot, at most: with the LRU over tables, what bounds
the memory of a cached table beyond its file groups (an answer over a large partition is
tens of kilobytes, one over all partitions may be megabytes)."""


@dataclass(frozen=True)
class PendingOperation:
    """One file group of a pending compaction (or log compaction) plan."""

    instant_time: str
    operation: Mapping[str, Any]
    """The plan's `HoodieCompactionOperation` record."""


@dataclass(frozen=True)
class PendingClustering:
    partition: str
    file_id: str
    instant_time: str
    action: Action


class _Listed:
    """What `fs_view` reads of storage, answered from a kept listing of one partition."""

    def __init__(self, files: Sequence[FileInfo]) -> None:
        self._files = files

    def list_dir(self, path: str) -> list[FileInfo]:
        return list(self._files)


@dataclass
class Snapshot:
    """The view at one timeline; every query is a pure function of it."""

    timeline: Timeline
    visible: list[Instant]
    hash: str
    groups: dict[str, list[FileGroup]]
    """Per partition, every file group (replaced ones too), by file id."""
    replaced: dict[FileGroupId, Instant]
    pending_compaction: dict[FileGroupId, PendingOperation]
    pending_log_compaction: dict[FileGroupId, PendingOperation]
    pending_clustering: list[PendingClustering]
    modified: dict[str, float] = field(default_factory=dict)
    """Modification time (s) of each listed file, by path relative to the base path."""
    answers: OrderedDict[Hashable, bytes] = field(default_factory=OrderedDict, repr=False)
    """Encoded answers of this snapshot (the same question from many writers), newest last."""
    answers_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    answers_bytes: int = field(default=0, repr=False)

    def memo(self, key: Hashable) -> bytes | None:
        with self.answers_lock:
            found = self.answers.get(key)
            if found is not None:
                self.answers.move_to_end(key)
            return found

    def remember(self, key: Hashable, body: bytes) -> None:
        """Keep an answer, the least recently asked leaving first past `MEMO_ANSWERS` or
        `MEMO_BYTES`; an answer larger than `MEMO_BYTES` alone is not kept."""
        if len(body) > MEMO_BYTES:
            return
        with self.answers_lock:
            previous = self.answers.pop(key, None)
            if previous is not None:
                self.answers_bytes -= len(previous)
            self.answers[key] = body
            self.answers_bytes += len(body)
            while len(self.answers) > MEMO_ANSWERS or self.answers_bytes > MEMO_BYTES:
                _, dropped = self.answers.popitem(last=False)
                self.answers_bytes -= len(dropped)

    # Timeline -----------------------------------------------------------------------------

    @property
    def last_instant(self) -> Instant | None:
        return self.visible[-1] if self.visible else None

    @property
    def write_timeline(self) -> list[Instant]:
        return write_instants(self.visible)

    # File groups --------------------------------------------------------------------------

    def partitions(self) -> list[str]:
        return sorted(self.groups)

    def file_groups(self, partition: str | None) -> list[FileGroup]:
        """Every stored file group of one partition (all partitions for None)."""
        if partition is not None:
            return list(self.groups.get(partition, ()))
        return [g for p in self.partitions() for g in self.groups[p]]

    def is_replaced(self, group: FileGroup) -> bool:
        return (group.partition_path, group.file_id) in self.replaced

    def replaced_at(self, group: FileGroup) -> str | None:
        instant = self.replaced.get((group.partition_path, group.file_id))
        return instant.requested_time if instant else None

    def live_groups(self, partition: str | None) -> list[FileGroup]:
        return [g for g in self.file_groups(partition) if not self.is_replaced(g)]

    def replaced_before_or_on(self, group: FileGroup, instant: str) -> bool:
        at = self.replaced_at(group)
        return at is not None and instant >= at

    def replaced_before(self, group: FileGroup, instant: str) -> bool:
        at = self.replaced_at(group)
        return at is not None and instant > at

    def replaced_after_or_on(self, group: FileGroup, instant: str) -> bool:
        at = self.replaced_at(group)
        return at is not None and instant <= at

    def compaction_of(self, group: FileGroup) -> str | None:
        pending = self.pending_compaction.get((group.partition_path, group.file_id))
        return pending.instant_time if pending else None

    # Slices, newest first -------------------------------------------------------------------

    @staticmethod
    def slices(group: FileGroup) -> list[FileSlice]:
        return list(reversed(group.slices))

    @staticmethod
    def slices_before_or_on(group: FileGroup, instant: str) -> list[FileSlice]:
        return [s for s in reversed(group.slices) if s.base_instant_time <= instant]

    @staticmethod
    def slice_before(group: FileGroup, instant: str) -> FileSlice | None:
        return next((s for s in reversed(group.slices) if s.base_instant_time < instant), None)

    def without_pending_base(self, piece: FileSlice, keep_empty: bool) -> FileSlice | None:
        """`filterBaseFileAfterPendingCompaction`: a slice at a pending compaction's instant
        has no base file yet; an emptied slice is dropped unless `keep_empty`."""
        group_id = (piece.partition_path, piece.file_id)
        pending = self.pending_compaction.get(group_id)
        if pending is None or pending.instant_time != piece.base_instant_time:
            return piece
        if piece.base_file is None:
            return piece if (keep_empty or piece.log_files) else None
        trimmed = FileSlice(
            piece.partition_path, piece.file_id, piece.base_instant_time, None, piece.log_files
        )
        return trimmed if (keep_empty or trimmed.log_files) else None

    def merged(self, group: FileGroup, piece: FileSlice) -> FileSlice:
        """`fetchMergedFileSlice`: a slice at a pending compaction's instant joined with the
        slice before it (its base file, the logs of both)."""
        compaction = self.compaction_of(group)
        if compaction is None or piece.base_instant_time != compaction:
            return piece
        previous = self.slice_before(group, compaction)
        if previous is None:
            return piece
        return FileSlice(
            previous.partition_path,
            previous.file_id,
            previous.base_instant_time,
            previous.base_file,
            previous.log_files + piece.log_files,
        )

    # Base files, newest first ---------------------------------------------------------------

    def base_files(self, group: FileGroup) -> list[BaseFile]:
        """Committed base files that are not the output of a pending compaction or clustering."""
        pending = {c.instant_time for c in self.pending_clustering}
        compaction = self.compaction_of(group)
        return [
            s.base_file
            for s in reversed(group.slices)
            if s.base_file is not None
            and s.base_file.name.instant_time != compaction
            and s.base_file.name.instant_time not in pending
        ]


def build_snapshot(
    timeline: Timeline,
    listings: Mapping[str, Sequence[FileInfo]],
    replace_metadata: ReplaceMetadataOf,
    *,
    previous: Snapshot | None = None,
    changed: set[str] | None = None,
    completion_times: CompletionTimes | None = None,
) -> Snapshot:
    """The view of `timeline` over the listed partitions (`listings`: partition -> files);
    `completion_times` gives layout 1's completed instants theirs (`completion_times`).

    With the `previous` snapshot and the partitions whose files `changed` since, the file
    groups of the others are kept as they were: new completed writes change only the
    partitions they wrote (their files were either absent or not yet committed), as long as
    the pending (log) compactions, which give file groups a slice of their own, are the same.
    """
    kept: dict[str, list[FileGroup]] = {}
    same_plans = previous is not None and _pending_plans(previous.timeline) == _pending_plans(
        timeline
    )
    if previous is not None and changed is not None and same_plans:
        kept = {p: g for p, g in previous.groups.items() if p not in changed}
    visible = with_completion_times(visible_instants(timeline), completion_times or {})
    replaced = _replaced(timeline, replace_metadata)
    slicer = PartitionSlicer.of(timeline)
    groups: dict[str, list[FileGroup]] = {}
    modified: dict[str, float] = {}
    for partition, files in listings.items():
        modified.update((f.path, f.modified) for f in files)
        if partition in kept:
            groups[partition] = kept[partition]
            continue
        storage = cast(Storage, _Listed(files))
        groups[partition] = slicer.file_groups(storage, partition)
    return Snapshot(
        timeline=timeline,
        visible=visible,
        hash=timeline_hash(visible),
        groups=groups,
        replaced=replaced,
        pending_compaction=_pending_operations(timeline, Action.COMPACTION),
        pending_log_compaction=_pending_operations(timeline, Action.LOG_COMPACTION),
        pending_clustering=_pending_clustering(timeline),
        modified=modified,
    )


def _pending_plans(timeline: Timeline) -> set[tuple[str, Action]]:
    return {
        (i.requested_time, i.action)
        for i in timeline.pending((Action.COMPACTION, Action.LOG_COMPACTION))
    }


def _replaced(timeline: Timeline, metadata_of: ReplaceMetadataOf) -> dict[FileGroupId, Instant]:
    """Each replaced file group and the latest completed replacecommit that replaced it."""
    replaced: dict[FileGroupId, Instant] = {}
    for instant in timeline.completed((Action.REPLACE_COMMIT,)):
        metadata = metadata_of(instant)
        if metadata is None:
            continue
        for partition, file_ids in metadata.partition_to_replace_file_ids.items():
            for file_id in file_ids:
                current = replaced.get((partition, file_id))
                if current is None or current.requested_time < instant.requested_time:
                    replaced[(partition, file_id)] = instant
    return replaced


def _pending_operations(timeline: Timeline, action: Action) -> dict[FileGroupId, PendingOperation]:
    found: dict[FileGroupId, PendingOperation] = {}
    for instant in timeline.pending((action,)):
        plan = timeline.avro_details(instant, State.REQUESTED) or {}
        for op in plan.get("operations") or []:
            if op.get("fileId"):
                key = (op.get("partitionPath") or "", op["fileId"])
                found[key] = PendingOperation(instant.requested_time, op)
    return found


def _pending_clustering(timeline: Timeline) -> list[PendingClustering]:
    """File groups of pending clustering plans, with the requested instant as Hudi names it
    (`ClusteringUtils.getAllFileGroupsInPendingClusteringPlans`)."""
    found: list[PendingClustering] = []
    for instant in timeline.pending_clusterings():
        try:
            plan = timeline.clustering_plan(instant)
        except ValueError:
            continue
        action = timeline.origin_action(instant)
        for group in plan.get("inputGroups") or []:
            for piece in group.get("slices") or []:
                if piece.get("fileId"):
                    found.append(
                        PendingClustering(
                            piece.get("partitionPath") or "",
                            piece["fileId"],
                            instant.requested_time,
                            action,
                        )
                    )
    return found


def data_file_commit_time(name: str | None) -> str | None:
    """`FSUtils.getCommitTime` of a plan's base file name."""
    if not name:
        return None
    parsed = BaseFileName.parse(name.rsplit("/", 1)[-1])
    if parsed is not None:
        return parsed.instant_time
    parts = name.rsplit("/", 1)[-1].split("_")
    return parts[2].split(".")[0] if len(parts) > 2 else None


def sorted_groups(groups: Iterable[FileGroup]) -> list[FileGroup]:
    return sorted(groups, key=lambda g: (g.partition_path, g.file_id))
