"""Executors of pending plans, after Hudi's action executors.

Whoever runs a plan (the registry, a job) asks a `PlanExecutor`: `execute` runs the pending
plan at an instant and reports its figures. A service may be run by more than one executor
of the same plans (tms's own Spark tasks, or Hudi's table service code); each is one
implementation of this protocol, picked by the registry, so nothing above it changes.

`CommitActionExecutor` is the skeleton of a plan whose Spark tasks write new base files and
whose instant completes as a commit (compaction, clustering), as Hudi's
`BaseCommitActionExecutor` is: pending plan, refusals, conflict check (RFC-56), inflight with
a heartbeat, the metadata table's delta commit, one Spark task per file group (or clustering
group), reconciliation of files no task reported, completion under the table lock, markers,
figures. An action supplies the steps that differ as hooks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.marked_files import delete_unreported_files
from tms.hudi.files.markers import delete_markers
from tms.hudi.files.write_conflicts import FileGroupId
from tms.hudi.metadata.writer import PendingDeltaCommit
from tms.hudi.table import HudiTable
from tms.hudi.timeline.cancel_requests import plan_is_cancellable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import Timeline
from tms.hudi.timeline.transitions import transition
from tms.services import progress
from tms.services.conflicts import ConflictCheck
from tms.services.execution import (
    ServiceResult,
    committing,
    executing,
    pending_plan,
    resolve_conflicts,
)
from tms.services.metadata_sync import MetadataSync, WrittenFile
from tms.services.spark import TaskInfo, run_tasks
from tms.services.table_refusals import ensure_supported
from tms.spark_runtime.task_memory import DEFAULT_RECORDS, task_memory_budget
from tms.testing.fault_pause import pause_point

__all__ = [
    "CommitActionExecutor",
    "ExecutionContext",
    "FunctionExecutor",
    "PlanExecutor",
    "ReadPlan",
    "StageHook",
]

StageHook = Callable[[str], None]
"""Hears the name of each stage an execution enters."""


class PlanExecutor(Protocol):
    """Runs the pending plan of one action at `instant_time` on Spark and completes it."""

    def execute(
        self,
        spark: Any,
        table: HudiTable,
        instant_time: str,
        *,
        heartbeat_interval: float = 60.0,
        on_stage: StageHook | None = None,
    ) -> ServiceResult:
        """The execution's figures; `on_stage` hears the stages of executors that name them
        (others ignore it)."""
        ...


class ReadPlan(Protocol):
    """A pending plan as read for its execution, before anything is written."""

    @property
    def plan(self) -> Mapping[str, Any]:
        """The plan's Avro record (cancellable or not, its extra metadata)."""
        ...

    @property
    def file_groups(self) -> frozenset[FileGroupId]:
        """The file groups the plan rewrites: those other writers must not touch."""
        ...


@dataclass(frozen=True)
class FunctionExecutor:
    """A `PlanExecutor` of a service whose execution is one function
    `(spark, table, instant_time, *, heartbeat_interval[, on_stage])`."""

    function: Callable[..., ServiceResult]
    names_stages: bool = False
    """Whether the function takes `on_stage`, naming the stages it enters."""

    def execute(
        self,
        spark: Any,
        table: HudiTable,
        instant_time: str,
        *,
        heartbeat_interval: float = 60.0,
        on_stage: StageHook | None = None,
    ) -> ServiceResult:
        if self.names_stages and on_stage is not None:
            return self.function(
                spark, table, instant_time, heartbeat_interval=heartbeat_interval, on_stage=on_stage
            )
        return self.function(spark, table, instant_time, heartbeat_interval=heartbeat_interval)


P = TypeVar("P", bound=ReadPlan)
T = TypeVar("T")
O = TypeVar("O")  # noqa: E741


@dataclass(frozen=True)
class ExecutionContext:
    """What the hooks of one execution see once its instant is inflight."""

    table: HudiTable
    instant_time: str
    timeline: Timeline
    """The timeline after an earlier attempt's rollback."""
    sync: MetadataSync | None
    """The table's metadata table, None when it has none."""
    pending: PendingDeltaCommit | None
    """The metadata table's delta commit begun before the tasks (`begin_sync`)."""
    conflicts: ConflictCheck
    cancellable: bool
    memory_budget: int = DEFAULT_RECORDS
    """Bytes of records each task may hold (`tms.spark_runtime.task_memory`)."""


class CommitActionExecutor(ABC, Generic[P, T, O]):
    """The execution of a plan whose Spark tasks (`T` in, `O` out) write new base files and
    whose instant completes as a commit; `P` is the plan as the action reads it."""

    name: ClassVar[str]
    """The action, as figures and the Spark job's description name it."""
    stage: ClassVar[str]
    """The progress stage of its Spark tasks."""
    plan_actions: ClassVar[tuple[Action, ...]]
    """The timeline actions its plan may be pending as."""
    conflicts_on_log_files: ClassVar[bool]
    """Other writers' log files on the plan's file groups conflict too (`ConflictCheck`)."""
    writes_new_file_groups: ClassVar[bool]
    """Its files are new file groups: files of failed task attempts are looked for among all
    of the instant's markers, not only those of the plan's file groups."""

    # Hooks --------------------------------------------------------------------------------

    def refuse(self, table: HudiTable, timeline: Timeline) -> None:
        """Refuse, before anything is written, a table the action would damage."""
        ensure_supported(table, timeline)

    @abstractmethod
    def read_plan(self, table: HudiTable, timeline: Timeline, instant: Instant) -> P:
        """The pending plan, checked (paths inside the table, columns of the schema)."""

    def begin_sync(self, context: ExecutionContext) -> PendingDeltaCommit | None:
        """A delta commit of the metadata table its tasks write into (None: written whole at
        completion)."""
        return None

    @abstractmethod
    def tasks(self, plan: P, context: ExecutionContext) -> Sequence[T]:
        """One picklable unit of work per Spark task."""

    @abstractmethod
    def task_function(self, plan: P, context: ExecutionContext) -> Callable[[T, TaskInfo], O]:
        """What each Spark task runs (picklable: a module-level function, or one bound to
        what every task of the execution shares)."""

    def run(
        self, spark: Any, plan: P, context: ExecutionContext, tasks: Sequence[T], description: str
    ) -> list[O]:
        """The tasks' outcomes: one Spark task each (an action may shape its job otherwise)."""
        return run_tasks(spark, self.task_function(plan, context), tasks, description=description)

    @abstractmethod
    def written(self, outcomes: Sequence[O]) -> list[WrittenFile]:
        """The new files the tasks reported."""

    @abstractmethod
    def commit_metadata(self, plan: P, schema: Mapping[str, str]) -> CommitMetadata:
        """The completed instant's metadata, before its write stats; `schema` is the
        table's schema as extra metadata (empty when the table has none)."""

    def replaced(self, plan: P) -> dict[str, list[str]] | None:
        """File ids the instant replaces, by partition (None: it replaces none)."""
        return None

    def metadata_logs(self, outcomes: Sequence[O]) -> list[WriteStat]:
        """Log files the tasks wrote into the begun delta commit of the metadata table."""
        return []

    @abstractmethod
    def totals(self, result: ServiceResult, plan: P, outcomes: Sequence[O]) -> None:
        """The figures only the action knows: file groups, log files and records merged."""

    # The skeleton -------------------------------------------------------------------------

    def execute(
        self,
        spark: Any,
        table: HudiTable,
        instant_time: str,
        *,
        heartbeat_interval: float = 60.0,
        on_stage: StageHook | None = None,
    ) -> ServiceResult:
        """Execute the pending plan at `instant_time` on Spark and complete its instant.

        An attempt that crashed earlier is rolled back first (by `executing`); files of
        failed task attempts (marked but not reported) are deleted before the instant
        completes. Raises `PlanNotFoundError` when no such plan is pending, and
        `UnsafePathError`, before anything is written, when the plan names a path outside
        the table.
        """
        timeline = table.timeline()
        self.refuse(table, timeline)
        instant = pending_plan(table, instant_time, self.plan_actions)
        plan = self.read_plan(table, timeline, instant)
        MetadataSync.of(table, timeline)  # refusals, before anything is written
        cancellable = plan_is_cancellable(plan.plan)
        conflicts = self._conflict_check(table, instant_time, plan, cancellable)
        schema_json = timeline.latest_schema()
        schema = {"schema": schema_json} if schema_json else {}
        result = ServiceResult(action=self.name, instant=instant_time)
        with executing(
            table, instant, result, heartbeat_interval, cancellable=cancellable
        ) as inflight:
            context = self._inflight_context(spark, table, instant_time, conflicts, cancellable)
            tasks = self.tasks(plan, context)
            resolve_conflicts(table, conflicts, wait=True)
            progress.enter(self.stage)
            outcomes = self.run(
                spark, plan, context, tasks, f"tms {self.name} {instant_time} of {table.name}"
            )
            stats = self._complete(plan, context, inflight, outcomes, schema, result)
        _add_written(result, stats)
        self.totals(result, plan, outcomes)
        return result

    def _conflict_check(
        self, table: HudiTable, instant_time: str, plan: P, cancellable: bool
    ) -> ConflictCheck:
        """Other writers' writes on the plan's file groups (RFC-56), checked before the tasks,
        by them when the plan is cancellable, and at the commit."""
        return ConflictCheck(
            table.base_path,
            instant_time,
            plan.file_groups,
            any_file=self.conflicts_on_log_files,
            cancellable=cancellable,
            lock=table.lock,
        )

    def _inflight_context(
        self,
        spark: Any,
        table: HudiTable,
        instant_time: str,
        conflicts: ConflictCheck,
        cancellable: bool,
    ) -> ExecutionContext:
        """What the hooks see once the instant is inflight: the timeline and the metadata
        table read again (an earlier attempt's rollback may have changed them), and the
        metadata table's delta commit begun when the action writes into one."""
        timeline = table.timeline()
        sync = MetadataSync.of(table, timeline)  # after an earlier attempt's rollback
        context = ExecutionContext(
            table,
            instant_time,
            timeline,
            sync,
            None,
            conflicts,
            cancellable,
            memory_budget=task_memory_budget(spark),
        )
        if sync is not None:
            context = replace(context, pending=self.begin_sync(context))
        return context

    def _complete(
        self,
        plan: P,
        context: ExecutionContext,
        inflight: Instant,
        outcomes: Sequence[O],
        schema: Mapping[str, str],
        result: ServiceResult,
    ) -> list[WriteStat]:
        """After the tasks: files no task reported deleted, then, under the table lock, the
        metadata table's delta commit and the instant completed; its write stats."""
        table, instant_time, sync = context.table, context.instant_time, context.sync
        written = self.written(outcomes)
        stats = [w.stat for w in written]
        result.foreign_markers = delete_unreported_files(
            table.storage,
            instant_time,
            {s.path for s in stats if s.path},
            None if self.writes_new_file_groups else plan.file_groups,
        )
        metadata = self.commit_metadata(plan, schema)
        for stat in stats:
            metadata.add_write_stat(stat.partition_path or "", stat)
        progress.enter("committing")
        with committing(
            table, instant_time, cancellable=context.cancellable, conflicts=context.conflicts
        ):
            if sync is not None:
                progress.enter("syncing metadata")
                update = sync.commit_update(instant_time, metadata, written, self.replaced(plan))
                if context.pending is None:
                    sync.write(instant_time, update)
                else:
                    sync.finish(context.pending, update, self.metadata_logs(outcomes))
                pause_point("metadata committed")
            transition(table.storage, table.config, inflight, State.COMPLETED, metadata)
        delete_markers(table.storage, instant_time)
        return stats


def _add_written(result: ServiceResult, stats: Sequence[WriteStat]) -> None:
    """The figures of the new files, from their write stats."""
    result.files_written = len(stats)
    result.bytes_written = sum(s.total_write_bytes for s in stats)
    result.records_written = sum(s.num_writes for s in stats)
