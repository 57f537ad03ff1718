"""The metadata table's compaction as a table service (`metadata-compaction`): the plan is
written by `tms.hudi.metadata.compaction`, and each file group of it is merged in its own Spark
task, as data table compaction does. The job heartbeats the instant on the metadata table, so
a second run of the same plan while one is alive is refused. The metadata table's clean
(`tms.services.metadata.clean`) follows each compaction, as Hudi's metadata writer does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tms.hudi.actions import METADATA_COMPACTION
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import PlanCompletedError
from tms.hudi.metadata.compaction import (
    CompactionTask,
    MetadataCompactionResult,
    compact_file_group,
    execute_metadata_compaction,
    pending_metadata_compactions,
    schedule_metadata_compaction,
)
from tms.hudi.metadata.reader import metadata_storage
from tms.hudi.properties import PROPERTIES_PATH
from tms.hudi.table import HudiTable
from tms.services import progress
from tms.services.execution import ServiceResult, running_plan
from tms.services.metadata.clean import clean_metadata_table
from tms.services.plan_executor import StageHook
from tms.services.spark import TaskInfo, run_tasks
from tms.spark_runtime.task_memory import task_memory_budget

__all__ = ["MetadataCompactionExecutor", "execute", "pending_plans", "schedule"]


def _has_metadata_table(table: HudiTable) -> bool:
    """A table without a metadata table has nothing to compact: the policy may create this
    action for any table, so that is a job with nothing to do, not a failure."""
    return metadata_storage(table.storage).exists(PROPERTIES_PATH)


def schedule(table: HudiTable) -> str | None:
    """Plan a compaction of the table's metadata table; None when nothing is due (no
    metadata table included)."""
    if not _has_metadata_table(table):
        return None
    return schedule_metadata_compaction(table.storage)


def pending_plans(table: HudiTable) -> list[str]:
    if not _has_metadata_table(table):
        return []
    return pending_metadata_compactions(table.storage)


def _task(task: CompactionTask, info: TaskInfo) -> WriteStat:
    return compact_file_group(task, info.write_token)


class MetadataCompactionExecutor:
    """The `PlanExecutor` of the metadata table's compaction plans: each file group merged in
    its own Spark task (`tms.services.spark`, stage `compacting`), then the metadata table's
    clean (its figure is `files_deleted`). The plan's pending instant, rollback of a crashed
    attempt, inflight and completion are the metadata table's own
    (`tms.hudi.metadata.compaction`): no refusals of the data table, no table lock, conflicts,
    cancel or metadata sync, which a data table's `CommitActionExecutor` has. A retry that finds
    the compaction completed still runs the clean (a job killed during it leaves its plan
    pending), then reports the compaction done."""

    def execute(
        self,
        spark: Any,
        table: HudiTable,
        instant_time: str,
        *,
        heartbeat_interval: float = 60.0,
        on_stage: StageHook | None = None,
    ) -> ServiceResult:
        storage = metadata_storage(table.storage)
        result = ServiceResult(action=METADATA_COMPACTION, instant=instant_time)
        busy = f"metadata compaction {instant_time} is being run by another job (live heartbeat)"

        def on_spark(tasks: Sequence[CompactionTask]) -> list[WriteStat]:
            description = f"tms metadata compaction {instant_time} of {table.name}"
            progress.enter("compacting")
            return run_tasks(spark, _task, tasks, description=description)

        def clean() -> ServiceResult | None:
            progress.enter("cleaning")
            return clean_metadata_table(spark, table, heartbeat_interval=heartbeat_interval)

        with running_plan(storage, instant_time, result, heartbeat_interval, busy=busy) as plan_run:
            try:
                with plan_run.heartbeating():  # its rollback and inflight are the metadata table's
                    done = execute_metadata_compaction(
                        table.storage,
                        instant_time,
                        run=on_spark,
                        memory_budget=task_memory_budget(spark),
                    )
            except PlanCompletedError:
                # a retry of a job lost after the compaction committed: its clean, perhaps left
                # pending on the metadata table, is still this operation's to finish
                clean()
                raise
            cleaned = clean()
            _add_figures(result, done, cleaned)
        return result


def _add_figures(
    result: ServiceResult, done: MetadataCompactionResult, cleaned: ServiceResult | None
) -> None:
    """The compaction's figures, and the files its clean deleted."""
    result.file_groups = done.file_groups
    result.files_written = done.files_written
    result.bytes_written = done.bytes_written
    result.records_written = done.records_written
    result.log_files_compacted = done.log_files_compacted
    result.files_deleted = cleaned.files_deleted if cleaned else 0
    result.rolled_back = done.rolled_back


execute = MetadataCompactionExecutor().execute
"""Run the metadata table's pending compaction at `instant_time` on Spark, then the
metadata table's clean."""
