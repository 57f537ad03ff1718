"""Clean execution: the files of a clean plan deleted on Spark, and the clean instant completed.

Execution moves `<ts>.clean.requested` to `.clean.inflight` (holding the plan again, as Hudi
does), deletes the files, then the folders of the plan's `partitionsToBeDeleted` (on a
partitioned table, as `CleanActionExecutor.clean` deletes them, after the files), and completes
`<ts>.clean` with `HoodieCleanMetadata` (file names per partition, as `CleanActionExecutor`
records them, `isPartitionDeleted` for the deleted partitions; one with no file in the plan,
which Hudi's executor leaves out of the metadata, is recorded too, so the metadata table
forgets it as well). It reads any version 1 or 2 clean plan, ours
or one Hudi scheduled; planning lives in `tms.services.clean.plan`, and `schedule_clean` is
re-exported here so this module stays the clean service's entry point, as
`tms.services.clustering.execute` is for clustering. Every partition and file the plan names is
confined to the table (`tms.hudi.table_paths`) before anything moves.

A crashed clean is finished, never rolled back: deletes cannot be undone and are idempotent,
so running the plan again (files already gone count as deleted: `Inflight.RUN_AGAIN`) is what
Hudi does too. On a table with a metadata table, the metadata table's delta commit of the clean
(deletions of the plan's files, their column stats and bloom filters, the deleted partitions'
files records and partition list entries) is written before the clean completes; one left
by a crashed attempt is rolled back and written again.
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tms.hudi.avro import codec as avro_codec
from tms.hudi.files.fs_view import replaced_file_groups
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.table_paths import TablePaths
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import transition
from tms.services import progress
from tms.services.clean.plan import KEEP_LATEST_COMMITS, has_pending_files, schedule_clean
from tms.services.execution import (
    Inflight,
    ServiceResult,
    committing,
    pending_plan,
    running_plan,
)
from tms.services.metadata_sync import MetadataSync
from tms.services.spark import TaskInfo, run_tasks
from tms.services.table_refusals import ensure_supported
from tms.testing.fault_pause import pause_point
from tms.testing.task_pause import TASKS_WRITING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["execute_clean", "plan_files", "plan_partitions", "schedule_clean"]

log = logging.getLogger(__name__)

CLEAN_METADATA_VERSION = 2
FILES_PER_TASK = 1000
"""A partition with more files to delete is split over several Spark tasks (skew)."""


def execute_clean(
    spark: SparkSession,
    table: HudiTable,
    instant_time: str,
    *,
    heartbeat_interval: float = heartbeat.DEFAULT_INTERVAL_SECONDS,
    stage_prefix: str = "",
) -> ServiceResult:
    """Delete the files of a pending clean plan on Spark and complete `<ts>.clean`.

    Partitions (in chunks of `FILES_PER_TASK` files) are Spark tasks: deleting is one storage
    request per file, so on object stores spreading them over executors is what keeps a large
    clean short, and the driver only gathers file names. An inflight clean left by a crash is
    run again; a live heartbeat means another job is running it. The plan's
    `partitionsToBeDeleted` folders go once its files are gone. A plan naming a path outside
    the table (a file or a partition) is refused with `UnsafePathError` before the instant
    moves or any file is deleted. `stage_prefix` names
    its stages apart from those of a job's other service (the metadata table's clean after
    its compaction), in the work's progress and for the fault tests.
    """
    started = time.monotonic()
    timeline = table.timeline()
    ensure_supported(table, timeline)
    instant = pending_plan(table, instant_time, (Action.CLEAN,))
    result = ServiceResult(action=Action.CLEAN.value, instant=instant_time)
    busy = f"clean {instant_time} has a live heartbeat (a job is running it)"
    with running_plan(
        table.storage, instant_time, result, heartbeat_interval, busy=busy, started=started
    ) as run:
        requested_bytes = timeline.read_instant(instant, State.REQUESTED)
        plan = avro_codec.decode(requested_bytes)
        paths = TablePaths(table.storage, f"clean plan {instant_time}")
        files = plan_files(plan, paths)
        partitions = plan_partitions(plan, paths, bool(table.config.partition_fields))
        replaced = frozenset(replaced_file_groups(timeline)) if partitions else frozenset()
        sync = MetadataSync.of(table, timeline)  # refusals, before anything is written
        clean = _CleanRun(
            spark, table, plan, files, partitions, replaced, sync, started, stage_prefix
        )
        with run.inflight(table, instant, Inflight.RUN_AGAIN, requested_bytes) as inflight:
            partition_metadata = clean.delete_and_complete(inflight)
        result.files_deleted = _files_deleted(partition_metadata)
        result.file_groups = _file_groups_deleted_from(partition_metadata)
    return result


@dataclass(frozen=True)
class _CleanRun:
    """A clean plan as its run read it, before anything was written."""

    spark: SparkSession
    table: HudiTable
    plan: dict[str, Any]
    files: dict[str, list[str]]
    """The files to delete per partition, confined to the table (`plan_files`)."""
    partitions: list[str]
    """The partitions whose folders go, confined to the table (`plan_partitions`)."""
    replaced: frozenset[tuple[str, str]]
    """(partition, file id) of the file groups completed replacecommits replaced."""
    sync: MetadataSync | None
    started: float
    """When the run's clock started (`time.monotonic()`), for the clean metadata's time."""
    stage_prefix: str

    def delete_and_complete(self, inflight: Instant) -> dict[str, dict[str, Any]]:
        """The plan's files deleted on Spark, then its partitions' folders, the metadata
        table's delta commit of the clean, then the instant completed under the table lock;
        the partitions' clean metadata."""
        table, instant_time, prefix = self.table, inflight.requested_time, self.stage_prefix
        outcomes = _delete_on_spark(self.spark, table.storage, instant_time, self.files, prefix)
        dropped = _delete_partitions(table.storage, self.partitions, self.replaced)
        partition_metadata = _partition_metadata(self.plan, self.files, outcomes, dropped)
        deleted = _files_deleted(partition_metadata)
        if self.sync is not None:
            _sync_metadata_table(self.sync, instant_time, partition_metadata)
        metadata = _clean_metadata(
            self.plan, instant_time, self.started, deleted, partition_metadata
        )
        progress.enter(f"{prefix}committing")
        with committing(table, instant_time, cancellable=False):
            transition(
                table.storage,
                table.config,
                inflight,
                State.COMPLETED,
                avro_codec.encode("HoodieCleanMetadata", metadata),
            )
        return partition_metadata


def _files_deleted(partition_metadata: dict[str, dict[str, Any]]) -> int:
    return sum(len(p["successDeleteFiles"]) for p in partition_metadata.values())


def _delete_on_spark(
    spark: SparkSession,
    storage: Storage,
    instant_time: str,
    files: dict[str, list[str]],
    stage_prefix: str,
) -> list[tuple[str, list[str], list[str]]]:
    """The plan's files deleted by Spark tasks of at most `FILES_PER_TASK` files each, a
    partition at a time; per task, (partition, names deleted, names failed)."""
    items = [
        (storage, partition, chunk)
        for partition, paths in sorted(files.items())
        for chunk in _chunks(paths, FILES_PER_TASK)
    ]
    progress.enter(f"{stage_prefix}cleaning")  # its tasks are chunks of files
    return run_tasks(
        spark,
        _delete_files,
        items,
        f"tms clean {instant_time}",
        file_groups=False,
        pause_step=f"{stage_prefix}{TASKS_WRITING}",
    )


def _delete_partitions(
    storage: Storage, partitions: list[str], replaced: frozenset[tuple[str, str]]
) -> list[str]:
    """The folders of the plan's deleted partitions, everything below them included (Hudi's
    `deleteDirectory`), once the files are gone; the partitions deleted. One already gone is
    done. Unlike Hudi, the planner's `has_pending_files` is asked again first: a writer may
    have written into the partition since the plan, and a partition holding such files stays
    (not deleted, and not recorded as deleted). A folder that cannot be deleted fails the run,
    which runs again (as Hudi 1.x fails a clean whose delete failed and the path remains)."""
    deleted: list[str] = []
    for partition in partitions:
        if has_pending_files(storage, partition, replaced):
            log.warning("partition %r holds files written since the plan: it stays", partition)
            continue
        storage.delete_dir(partition)
        deleted.append(partition)
    return deleted


def _sync_metadata_table(
    sync: MetadataSync, instant_time: str, partition_metadata: dict[str, dict[str, Any]]
) -> None:
    """The metadata table's delta commit of the clean: the planned files' deletions and the
    deleted partitions."""
    progress.enter("syncing metadata")
    names = {p: m["deletePathPatterns"] for p, m in partition_metadata.items()}
    dropped = [p for p, m in partition_metadata.items() if m["isPartitionDeleted"]]
    sync.write(instant_time, sync.clean_update(instant_time, names, dropped))
    pause_point("metadata committed")


def _clean_metadata(
    plan: dict[str, Any],
    instant_time: str,
    started: float,
    deleted: int,
    partition_metadata: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The `HoodieCleanMetadata` record the completed instant holds; its time taken runs
    from `started` (`time.monotonic()`) to now."""
    earliest = plan.get("earliestInstantToRetain") or {}
    return {
        "startCleanTime": instant_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": deleted,
        "earliestCommitToRetain": earliest.get("timestamp") or "",
        "lastCompletedCommitTimestamp": plan.get("lastCompletedCommitTimestamp") or "",
        "partitionMetadata": partition_metadata,
        "version": CLEAN_METADATA_VERSION,
        "bootstrapPartitionMetadata": {},
        "extraMetadata": plan.get("extraMetadata") or {},
    }


def _file_groups_deleted_from(partition_metadata: dict[str, dict[str, Any]]) -> int:
    """How many file groups lost a file, told by the deleted files' names."""
    return len(
        {
            (partition, _file_id(name))
            for partition, meta in partition_metadata.items()
            for name in meta["successDeleteFiles"]
        }
    )


def plan_files(plan: dict[str, Any], paths: TablePaths) -> dict[str, list[str]]:
    """Files to delete per partition, relative to the base path, from a version 2 plan
    (`filePathsToBeDeletedPerPartition`: full paths) or a version 1 plan
    (`filesToBeDeletedPerPartition`: names).

    Every path of the plan, in both forms and `partitionsToBeDeleted`, must stay inside the
    table: `paths` raises `UnsafePathError` naming the first that does not. Bootstrap base
    files live in the source table and are never deleted, so they are not resolved.
    """
    for partition in plan.get("partitionsToBeDeleted") or []:
        paths.partition(partition)
    by_name = {
        paths.partition(partition): [paths.data_file(partition, name) for name in names]
        for partition, names in (plan.get("filesToBeDeletedPerPartition") or {}).items()
    }
    by_path = {
        paths.partition(partition): [
            paths.data_file(partition, info["filePath"])
            for info in infos
            if info.get("filePath") and not info.get("isBootstrapBaseFile")
        ]
        for partition, infos in (plan.get("filePathsToBeDeletedPerPartition") or {}).items()
    }
    return by_path if any(by_path.values()) else by_name


def plan_partitions(plan: dict[str, Any], paths: TablePaths, partitioned: bool) -> list[str]:
    """The partitions whose folders the plan deletes (`partitionsToBeDeleted`), each confined
    to the table (`UnsafePathError` otherwise); none on a non-partitioned table and never the
    base path itself (`""`), as `CleanActionExecutor` skips both."""
    named = [paths.partition(partition) for partition in plan.get("partitionsToBeDeleted") or []]
    return sorted({partition for partition in named if partition}) if partitioned else []


def _chunks(names: list[str], size: int) -> list[list[str]]:
    return [names[i : i + size] for i in range(0, len(names), size)]


def _delete_files(
    item: tuple[Storage, str, list[str]], _: TaskInfo
) -> tuple[str, list[str], list[str]]:
    """On an executor: delete files of one partition (paths the driver resolved); a file
    already gone counts as deleted. Returns the file names deleted and failed."""
    storage, partition, paths = item
    done: list[str] = []
    failed: list[str] = []
    for path in paths:
        name = posixpath.basename(path)
        try:
            storage.delete(path)
        except OSError:
            if storage.exists(path):
                failed.append(name)
                continue
        done.append(name)
    return partition, done, failed


def _partition_metadata(
    plan: dict[str, Any],
    files: dict[str, list[str]],
    outcomes: list[tuple[str, list[str], list[str]]],
    partitions: list[str],
) -> dict[str, dict[str, Any]]:
    """`HoodieCleanPartitionMetadata` per partition: file names, as Hudi records them, and
    whether the clean deleted the partition."""
    merged: dict[str, dict[str, Any]] = {}
    for partition in sorted(set(files) | set(partitions)):
        merged[partition] = {
            "partitionPath": partition,
            "policy": plan.get("policy") or KEEP_LATEST_COMMITS,
            "deletePathPatterns": [posixpath.basename(p) for p in files.get(partition, [])],
            "successDeleteFiles": [],
            "failedDeleteFiles": [],
            "isPartitionDeleted": partition in partitions,
        }
    for partition, done, failed in outcomes:
        merged[partition]["successDeleteFiles"] += done
        merged[partition]["failedDeleteFiles"] += failed
    return merged


def _file_id(name: str) -> str:
    parsed = BaseFileName.parse(name) or LogFileName.parse(name)
    return parsed.file_id if parsed else name
