"""Clean plans: which file slices no query needs any more, chosen as Hudi's cleaner does.

Scheduling writes `<ts>.clean.requested` holding a `HoodieCleanerPlan` (version 2: absolute
paths per partition, as `CleanPlanActionExecutor` writes them). Planning only reads: the
timeline, the file-system view and savepoints, on the driver. Whatever the policy, the latest
file slice of a live file group stays, and so do slices a pending compaction or clustering
reads and files a savepoint pins. Execution lives in `tms.services.clean.execute`.

A partition a replacecommit emptied (partition TTL's or `delete_partition`'s
`DELETE_PARTITION`) goes too once its replaced file groups go: the plan lists it in
`partitionsToBeDeleted`, as Hudi 1.x's `CleanPlanner` marks it (the `Boolean` of
`getFilesToCleanKeepingLatestCommits` / `KeepingLatestVersions`): no live file group left,
no pending files under it (`hasPendingFiles`: a data file of a file group no completed
replacecommit replaced, committed or not), and, by commits, no file group of it replaced at
or after the earliest retained commit (`noSubsequentReplaceCommit`). Stricter than Hudi, so
that deleting the folder never takes a file this clean spares: every file of its replaced
file groups must be in this plan (none pinned by a savepoint, read by a pending compaction or
log compaction, or in a pending clustering), and no other partition may lie below it. Only a
partitioned table's partitions are planned: Hudi's executor deletes none of another table.
"""

from __future__ import annotations

import dataclasses
import logging
import posixpath
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tms.hudi.avro import codec as avro_codec
from tms.hudi.files.fs_view import FileGroup, FileSlice
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State, is_instant_time
from tms.hudi.timeline.timeline import Timeline
from tms.hudi.timeline.transitions import new_instant_time, request
from tms.services.clean.rollbacks import finish_before_clean
from tms.services.table_refusals import ensure_supported

log = logging.getLogger(__name__)

KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
POLICIES = (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS)
CLEAN_PLAN_VERSION = 2
SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"
"""Extra metadata key Hudi's incremental cleaner reads to notice removed savepoints."""
_WRITE_ACTIONS = (
    Action.COMMIT,
    Action.DELTA_COMMIT,
    Action.REPLACE_COMMIT,
    Action.COMPACTION,
    Action.CLUSTERING,
)
"""Hudi's commits-and-compaction timeline: a pending one caps the earliest retained commit."""


def schedule_clean(
    table: HudiTable,
    *,
    policy: str = KEEP_LATEST_COMMITS,
    retained: int = 10,
    instant_time: str | None = None,
    cancel_plans_after_hours: int | None = None,
    cancel_plans_after_instants: int | None = None,
    rollback_failed_writes: bool = False,
) -> str | None:
    """Plan a clean and write `<ts>.clean.requested`; None when nothing is to be deleted.

    A pending clean is returned instead of planning another: Hudi finishes pending cleans
    before planning new ones, and the service's retried calls must stay idempotent. First,
    as Hudi's clean rolls back failed writes before it plans, plans with a cancel request
    are aborted, cancellable plans past the cancellation policy (`cancel_plans_after_*`) are
    cancelled, and with `rollback_failed_writes` failed writes are rolled back
    (`tms.services.clean.rollbacks`): what they leave is cleaned like the rest.
    """
    _check_policy(policy, retained)
    timeline = _timeline_after_rollbacks(
        table,
        cancel_plans_after_hours=cancel_plans_after_hours,
        cancel_plans_after_instants=cancel_plans_after_instants,
        rollback_failed_writes=rollback_failed_writes,
    )
    pending = timeline.pending((Action.CLEAN,))
    if pending:
        return pending[0].requested_time
    _check_new_instant_time(timeline, instant_time)
    planner = CleanPlanner.build(table, timeline)
    earliest, files = _files_to_delete(planner, timeline, policy, retained)
    partitions = _partitions_to_delete(table, planner, policy, earliest, files)
    if not any(files.values()) and not partitions:
        return None
    instant_time = instant_time or new_instant_time(timeline.instants)
    plan = _cleaner_plan(table, timeline, planner, policy, earliest, files, partitions)
    request(
        table.storage,
        table.config,
        instant_time,
        Action.CLEAN,
        avro_codec.encode("HoodieCleanerPlan", plan),
    )
    return instant_time


def _check_policy(policy: str, retained: int) -> None:
    """Refuse a bad policy or count before the table is read (let alone rolled back)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown clean policy {policy!r}; valid policies: {', '.join(POLICIES)}")
    if retained < 1:
        raise ValueError(f"retained must be at least 1, not {retained}")


def _timeline_after_rollbacks(
    table: HudiTable,
    *,
    cancel_plans_after_hours: int | None,
    cancel_plans_after_instants: int | None,
    rollback_failed_writes: bool,
) -> Timeline:
    """The timeline to plan on, once what a clean finishes first is done
    (`finish_before_clean`); read again only when that aborted or rolled back an instant."""
    timeline = table.timeline()
    ensure_supported(table, timeline)
    finished = finish_before_clean(
        table,
        timeline,
        cancel_after_hours=cancel_plans_after_hours,
        cancel_after_instants=cancel_plans_after_instants,
        rollback_failed_writes=rollback_failed_writes,
    )
    if finished.aborted or finished.rolled_back:
        log.info("before planning the clean: aborted %s, rolled back %s", *finished.changed)
        timeline = table.timeline()
    return timeline


def _check_new_instant_time(timeline: Timeline, instant_time: str | None) -> None:
    """A caller's instant time must be well formed and not on the timeline yet."""
    if instant_time is not None and (
        not is_instant_time(instant_time) or timeline.get(instant_time) is not None
    ):
        raise ValueError(f"{instant_time!r} is not a new instant time for this table")


def _files_to_delete(
    planner: CleanPlanner, timeline: Timeline, policy: str, retained: int
) -> tuple[Instant | None, dict[str, list[str]]]:
    """The policy's choice: the earliest commit to retain (None when keeping file versions)
    and the files to delete per partition."""
    if policy == KEEP_LATEST_COMMITS:
        earliest = earliest_commit_to_retain(timeline, retained)
        return earliest, planner.keep_latest_commits(earliest)
    return None, planner.keep_latest_file_versions(retained)


def _partitions_to_delete(
    table: HudiTable,
    planner: CleanPlanner,
    policy: str,
    earliest: Instant | None,
    files: dict[str, list[str]],
) -> list[str]:
    """The partitions the plan deletes (`partitionsToBeDeleted`); none of a non-partitioned
    table, nor by commits before there is an earliest commit to retain (Hudi's planner
    marks none until the table has more commits than it retains)."""
    if not table.config.partition_fields:
        return []
    if policy == KEEP_LATEST_COMMITS and earliest is None:
        return []
    floor = earliest.requested_time if earliest is not None else None  # by commits only
    return [
        partition
        for partition in planner.emptied_partitions(floor, files)
        if not has_pending_files(table.storage, partition, planner.replaced_ids)
    ]


def has_pending_files(
    storage: Storage, partition: str, replaced: frozenset[tuple[str, str]]
) -> bool:
    """Whether a data file of `partition` belongs to a file group no completed replacecommit
    replaced (Hudi's `hasPendingFiles`: a listing, since the view counts committed files only
    and a pending write's files may yet commit). A failed listing counts as pending files."""
    try:
        entries = storage.list_dir(partition)
    except OSError:
        log.warning("listing %r failed: its pending files are assumed", partition, exc_info=True)
        return True
    for entry in entries:
        if entry.is_dir:
            continue
        name = BaseFileName.parse(entry.name) or LogFileName.parse(entry.name)
        if name is not None and (partition, name.file_id) not in replaced:
            return True
    return False


def _cleaner_plan(
    table: HudiTable,
    timeline: Timeline,
    planner: CleanPlanner,
    policy: str,
    earliest: Instant | None,
    files: dict[str, list[str]],
    partitions: list[str],
) -> dict[str, Any]:
    """The `HoodieCleanerPlan` record (version 2: absolute paths per partition)."""
    commits = timeline.commits()
    return {
        "earliestInstantToRetain": (
            {
                "timestamp": earliest.requested_time,
                "action": earliest.action.value,
                "state": "COMPLETED",
            }
            if earliest
            else None
        ),
        "lastCompletedCommitTimestamp": commits[-1].requested_time if commits else "",
        "policy": policy,
        "filesToBeDeletedPerPartition": {},
        "version": CLEAN_PLAN_VERSION,
        "filePathsToBeDeletedPerPartition": {
            partition: [
                {"filePath": table.storage.uri(path), "isBootstrapBaseFile": False}
                for path in sorted(paths)
            ]
            for partition, paths in sorted(files.items())
            if paths
        },
        "partitionsToBeDeleted": partitions,
        "extraMetadata": (
            {SAVEPOINTED_TIMESTAMPS: ",".join(planner.savepoint_times)}
            if planner.savepoint_times
            else {}
        ),
    }


def earliest_commit_to_retain(timeline: Timeline, retained: int) -> Instant | None:
    """The oldest of the last `retained` completed commits, as Hudi's `CleanerUtils` picks it.

    Never later than the last commit completed before the earliest pending write, compaction
    or clustering: that one may still need the slices it started from. None while the table
    has no more than `retained` commits (nothing to clean by commits yet).
    """
    completed = timeline.commits()
    if len(completed) <= retained:
        return None
    earliest = completed[len(completed) - retained]
    pending = timeline.pending(_WRITE_ACTIONS)
    if pending and earliest.requested_time > pending[0].requested_time:
        before = [i for i in completed if i.requested_time < pending[0].requested_time]
        return before[-1] if before else None
    return earliest


@dataclass(frozen=True)
class CleanPlanner:
    """What may go, per file group; each policy only chooses among unprotected slices."""

    file_groups: tuple[FileGroup, ...]
    """Live file groups, with all their committed slices."""
    replaced_groups: tuple[tuple[str, FileGroup], ...]
    """(replacing instant time, file group) of every file group a replacecommit replaced."""
    savepoint_times: tuple[str, ...]
    savepointed_files: frozenset[str]
    """File names listed by savepoints (Hudi lists names, we also accept paths)."""
    compaction_base_times: dict[tuple[str, str], str]
    """Per (partition, file id) in a pending compaction or log compaction, the earliest base
    instant their plans read (Hudi's `isFileSliceNeededForPendingMajorOrMinorCompaction`)."""
    clustering_groups: frozenset[tuple[str, str]]
    partitions: tuple[str, ...] = ()
    """Every partition the view listed."""
    replaced_ids: frozenset[tuple[str, str]] = frozenset()
    """(partition, file id) of every file group a completed replacecommit names, with files
    on storage or not."""

    @classmethod
    def build(cls, table: HudiTable, timeline: Timeline) -> CleanPlanner:
        replaced_at: dict[tuple[str, str], str] = {}
        for instant in timeline.completed((Action.REPLACE_COMMIT,)):
            metadata = timeline.commit_metadata(instant)
            for partition, ids in getattr(metadata, "partition_to_replace_file_ids", {}).items():
                for file_id in ids:
                    replaced_at.setdefault((partition, file_id), instant.requested_time)
        # One listing for live and replaced groups: a view of a timeline whose completed
        # replacecommits count as plain commits keeps the replaced groups' slices too.
        unreplaced = dataclasses.replace(
            timeline,
            instants=tuple(
                Instant(i.requested_time, Action.COMMIT, i.state, i.completion_time)
                if i.action is Action.REPLACE_COMMIT and i.is_completed
                else i
                for i in timeline.instants
            ),
        )
        view = table.file_system_view(unreplaced)
        savepoints = _savepoints(table)
        compaction: dict[tuple[str, str], str] = {}
        for instant in timeline.pending((Action.COMPACTION, Action.LOG_COMPACTION)):
            for op in timeline.compaction_plan(instant).get("operations") or []:
                key = (op.get("partitionPath") or "", op["fileId"])
                base = op.get("baseInstantTime") or ""
                compaction[key] = min(base, compaction.get(key, base))
        return cls(
            tuple(g for g in view.file_groups if cls._key(g) not in replaced_at),
            tuple(
                (replaced_at[key], g)
                for g in view.file_groups
                if (key := cls._key(g)) in replaced_at
            ),
            tuple(sorted(savepoints)),
            frozenset(name for names in savepoints.values() for name in names),
            compaction,
            frozenset(view.pending_clustering_file_ids()),
            tuple(view.partitions),
            frozenset(replaced_at),
        )

    def keep_latest_commits(self, earliest: Instant | None) -> dict[str, list[str]]:
        """Keep slices from the earliest retained commit on, plus the one a query at it reads."""
        files: dict[str, list[str]] = defaultdict(list)
        if earliest is None:
            return files
        floor = earliest.requested_time
        for replaced_at, group in self.replaced_groups:
            if replaced_at < floor:
                self._delete(files, group, group.slices, replaced=True)
        for group in self.file_groups:
            older = [s for s in group.slices if s.base_instant_time < floor]
            self._delete(files, group, older[:-1])  # the newest older slice stays
        return files

    def keep_latest_file_versions(self, versions: int) -> dict[str, list[str]]:
        """Keep the latest `versions` slices of each file group; replaced groups go entirely."""
        files: dict[str, list[str]] = defaultdict(list)
        for _, group in self.replaced_groups:
            self._delete(files, group, group.slices, replaced=True)
        for group in self.file_groups:
            free = [s for s in reversed(group.slices) if not self._compaction_needs(s)]
            keep = versions - (1 if self._key(group) in self.compaction_base_times else 0)
            self._delete(files, group, free[max(keep, 0) :])
        return files

    def emptied_partitions(self, floor: str | None, files: dict[str, list[str]]) -> list[str]:
        """Partitions with no live file group whose replaced file groups all go with `files`;
        by commits (`floor`, the earliest retained commit), none replaced at or after it
        (Hudi's `noSubsequentReplaceCommit`). Pending files are `has_pending_files`' to tell."""
        live = {g.partition_path for g in self.file_groups}
        replaced: dict[str, list[tuple[str, FileGroup]]] = defaultdict(list)
        for at, group in self.replaced_groups:
            replaced[group.partition_path].append((at, group))
        found = []
        for partition in self.partitions:
            if not partition or partition in live or self._holds_partitions(partition):
                continue
            groups = replaced.get(partition, [])
            if floor is not None and any(at >= floor for at, _ in groups):
                continue
            going = set(files.get(partition, ()))
            if all(set(s.paths) <= going for _, g in groups for s in g.slices):
                found.append(partition)
        return found

    def _holds_partitions(self, partition: str) -> bool:
        """Whether another partition lies below this one's folder (deleting it would take it)."""
        return any(p.startswith(partition + "/") for p in self.partitions)

    def _delete(
        self,
        files: dict[str, list[str]],
        group: FileGroup,
        slices: Iterable[FileSlice],
        replaced: bool = False,
    ) -> None:
        """Plan the slices' files, sparing what must survive whatever the policy says."""
        if self._key(group) in self.clustering_groups:
            return
        for piece in slices:
            if piece is group.latest_slice and not replaced:
                continue
            if self._compaction_needs(piece) or self._savepointed(piece):
                continue
            files[group.partition_path] += piece.paths

    def _compaction_needs(self, piece: FileSlice) -> bool:
        base = self.compaction_base_times.get((piece.partition_path, piece.file_id))
        return base is not None and piece.base_instant_time >= base

    def _savepointed(self, piece: FileSlice) -> bool:
        return any(
            path in self.savepointed_files or posixpath.basename(path) in self.savepointed_files
            for path in piece.paths
        )

    @staticmethod
    def _key(group: FileGroup) -> tuple[str, str]:
        return (group.partition_path, group.file_id)


def _savepoints(table: HudiTable) -> dict[str, set[str]]:
    """Per completed savepoint, the data file names it pins."""
    timeline = table.timeline()
    found: dict[str, set[str]] = {}
    for instant in timeline.completed((Action.SAVEPOINT,)):
        metadata = timeline.avro_details(instant, State.COMPLETED) or {}
        names: set[str] = set()
        for partition in (metadata.get("partitionMetadata") or {}).values():
            for name in partition.get("savepointDataFile") or []:
                names.update((name, posixpath.basename(name)))
        found[instant.requested_time] = names
    return found
