"""The table services, one entry per action: how to plan it, run a plan, and find its pending
plans. Everything that picks a service by its action name (`tms run`, the job) looks it up
here, so a new service is one new entry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tms.executor_choice import AUTO, HUDI, NATIVE, parse_executor
from tms.hudi.actions import (
    ARCHIVAL,
    CLEAN,
    CLUSTERING,
    COMPACTION,
    INDEXING,
    LOG_COMPACTION,
    METADATA_COMPACTION,
    PARTITION_TTL,
)
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import Timeline
from tms.planning import planning_arguments
from tms.services.apache_hudi.archiver import HUDI_ARCHIVER, archive, nothing_to_archive
from tms.services.apache_hudi.executor import HudiExecutor, HudiPlanner
from tms.services.apache_hudi.indexer import HudiIndexExecutor, HudiIndexPlanner
from tms.services.apache_hudi.log_compactor import HudiLogCompactionExecutor
from tms.services.apache_hudi.partition_ttl import HudiPartitionTtlExecutor
from tms.services.apache_hudi.procedures import HudisCode
from tms.services.clean import execute as clean
from tms.services.clean import plan as clean_plan
from tms.services.clustering import execute as clustering
from tms.services.clustering import plan as clustering_plan
from tms.services.compaction import execute as compaction
from tms.services.compaction import plan as compaction_plan
from tms.services.execution import ServiceResult
from tms.services.index import build as index
from tms.services.log_compaction import execute as log_compaction
from tms.services.log_compaction import plan as log_compaction_plan
from tms.services.metadata import compaction as metadata_compaction
from tms.services.partition_ttl import plan as partition_ttl_plan
from tms.services.plan_cancel import execute_cancel, request_cancel
from tms.services.plan_executor import FunctionExecutor, PlanExecutor, StageHook
from tms.services.rollback import rollback_inflight
from tms.services.table_refusals import ensure_supported, unsupported_features

__all__ = ["SERVICES", "DirectWork", "ExecutorDecision", "TableService", "Work", "table_service"]


@dataclass(frozen=True)
class ExecutorDecision:
    """Who runs an operation's plan, and why tms's own executor does not when it declined."""

    executor: str
    native_declined: str | None = None

    def figures(self) -> dict[str, str]:
        """What the job reports of the decision, with the operation's result."""
        figures = {"executor": self.executor}
        if self.native_declined:
            figures["native_declined"] = self.native_declined
        return figures


@dataclass(frozen=True)
class Work:
    """What an operation asks of its service, as far as the executors' choice goes: its
    planning parameters (a plan-less operation) or the plan it runs (`instant`)."""

    planning: Mapping[str, Any] | None = None
    instant: str | None = None


Declines = tuple[list[str], list[str]]


@dataclass(frozen=True, kw_only=True)
class DirectWork:
    """Work an operation of a service may ask for that is done at once: no plan on the
    timeline to adopt, write or run. An index's drop is one: tms's own code drops its
    partitions, with no Spark and no executor to choose (whoever was asked). Archival is
    another, every operation of it: Hudi's code archives, on Spark started with Hudi's bundle."""

    flag: str | None
    """The planning parameter that asks for it (true: the direct work, not a plan); None:
    every operation of the service is its direct work."""
    run: Callable[..., dict[str, Any]]
    """Does it on the table, taking the service's other planning arguments (and the job's
    Spark as `spark` when `by_hudi`); its figures."""
    by_hudi: HudisCode | None = None
    """Set when Apache Hudi's code does it: on Spark with Hudi's bundle, refused where that
    code cannot reach the table, and `native` declined (tms's own code has none). None: tms's
    own code does it at once, without Spark."""

    nothing_due: Callable[..., dict[str, Any] | None] | None = None
    """Its figures when nothing is due, found from the table before Spark starts (taking the
    service's other planning arguments); None from it: work is due. A job finding nothing
    due starts no Spark."""

    @property
    def on_spark(self) -> bool:
        """Whether the job starts Spark (with Hudi's bundle) before the work."""
        return self.by_hudi is not None


@dataclass(frozen=True, kw_only=True)
class TableService:
    """One table service, built with keywords: a new service is one module and one entry
    here (see docs/architecture.md, "Adding a table service")."""

    action: str
    planner: Callable[..., str | None] | None
    """Writes a plan (its instant, or None when nothing is due), taking the keyword
    arguments `tms.planning` lists for `action`; None for a service with no plans (every
    operation its `direct_work`)."""
    executors: Mapping[str, PlanExecutor]
    """Who may run its plans, by name (`tms.executor_choice`): `NATIVE` (tms's own Spark
    tasks) and `HUDI` (Hudi's own code), each where it has one."""
    find_pending: Callable[[HudiTable], list[str]]
    """Requested times of its pending plans, oldest first."""
    hudi_planner: HudiPlanner | HudiIndexPlanner | None = None
    """Plans with Hudi's own code, for operations its executor runs; None: `planner`'s plans
    are the ones Hudi's executor runs too."""
    checks_data_table: bool = True
    """Whether the data table must be one our data table services may change; the metadata
    table's own compaction refuses by its own rules instead."""
    plans_under_table_lock: bool | None = None
    """Whether its planner runs under the table lock the writers use; None: when it
    `checks_data_table`."""
    hold_stages: frozenset[str] = frozenset()
    """Stages a cancel request no longer stops once the execution enters one."""
    after_cancel: Callable[[HudiTable, str, float], None] | None = None
    """What a cancelled execution leaves (`cancelled`); None: its inflight instant is rolled
    back to requested, as after a crash."""
    declines_work: Callable[[HudiTable, Work], Declines] | None = None
    """Why each executor declines the operation's work itself, beyond the table (an index
    build's partitions): (native's reasons, Hudi's reasons)."""
    direct_work: DirectWork | None = None
    """Work it does at once, with no plan, when an operation's planning asks for it."""

    @property
    def planning_params(self) -> tuple[str, ...]:
        """The keyword arguments its planner takes (`tms.planning`'s one table)."""
        return planning_arguments(self.action)

    def asks_direct_work(self, planning: Mapping[str, Any] | None) -> bool:
        """Whether an operation's planning parameters ask for the service's direct work (any
        operation does, of a service whose every operation is)."""
        direct = self.direct_work
        if direct is None or direct.flag is None:
            return direct is not None
        return planning is not None and bool(planning.get(direct.flag))

    def run_direct_work(
        self, table: HudiTable, planning: Mapping[str, Any], spark: Any = None
    ) -> dict[str, Any]:
        """Do the direct work `planning` asks for (`asks_direct_work`), on `spark` when it
        runs there (`DirectWork.on_spark`); its figures."""
        direct = self.direct_work
        if direct is None or not self.asks_direct_work(planning):
            raise ValueError(f"{self.action} was not asked for work without a plan")
        if direct.on_spark:
            return direct.run(table, spark=spark, **self._arguments(planning))
        return direct.run(table, **self._arguments(planning))

    def direct_work_idle(
        self, table: HudiTable, planning: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """The figures of the direct work `planning` asks for when nothing is due (nothing to
        start Spark for); None when work is due, or the service cannot tell beforehand."""
        direct = self.direct_work
        if direct is None or direct.nothing_due is None or not self.asks_direct_work(planning):
            return None
        return direct.nothing_due(table, **self._arguments(planning or {}))

    def _arguments(self, planning: Mapping[str, Any]) -> dict[str, Any]:
        """The planning arguments `planning` gives, but the one asking for direct work."""
        flag = self.direct_work.flag if self.direct_work is not None else None
        return {n: planning[n] for n in self.planning_params if n in planning and n != flag}

    def ensure_supported(self, table: HudiTable) -> None:
        """Refuse, before anything is written, a table this service would damage."""
        if self.checks_data_table:
            ensure_supported(table)

    def declines(self, table: HudiTable, work: Work | None = None) -> Declines:
        """Why tms's own executor and Hudi's code cannot serve `table`, or do `work`:
        (native's reasons, Hudi's reasons), each empty when it can. Decided before anything
        is planned, so a refusal leaves no plan behind."""
        native = unsupported_features(table) if self.checks_data_table else []
        if NATIVE not in self.executors:
            native = [self._no_native()]
        hudi = self.executors.get(HUDI)
        if hudi is None:
            hudi_reasons = [f"{self.action} has no hudi executor"]
        elif isinstance(hudi, HudisCode):
            hudi_reasons = hudi.refusals(table)
        else:
            hudi_reasons = []
        if self.declines_work is not None:
            native_work, hudi_work = self.declines_work(table, work or Work())
            native, hudi_reasons = native + native_work, hudi_reasons + hudi_work
        return native, hudi_reasons

    def decide(
        self, table: HudiTable, requested: str, work: Work | None = None
    ) -> ExecutorDecision:
        """The executor of an operation that asked for `requested` (`tms.executor_choice`): `auto`
        is native where it supports the table and the `work`, else Hudi's code with the
        reason native declined. `UnsupportedTableError` when the one asked for, or every
        one, cannot."""
        choice = parse_executor(requested)
        if work is not None and self.asks_direct_work(work.planning):
            return self._decide_direct(table, choice)
        where = f"cannot run {self.action} on {table.storage.base_path}"
        if choice == NATIVE:
            if NATIVE not in self.executors:
                raise UnsupportedTableError(f"{where}: {self._no_native()}")
            self.ensure_supported(table)
            if self.declines_work is not None:  # refused before a plan is written
                native_work, _ = self.declines_work(table, work or Work())
                if native_work:
                    raise UnsupportedTableError(f"{where}: {'; '.join(native_work)}")
            return ExecutorDecision(NATIVE)
        reasons, hudi_refusals = self.declines(table, work)
        if choice == HUDI:
            if hudi_refusals:
                raise UnsupportedTableError(f"{where} with Hudi's code: {'; '.join(hudi_refusals)}")
            return ExecutorDecision(HUDI)
        if not reasons:
            return ExecutorDecision(NATIVE)
        if not hudi_refusals:
            return ExecutorDecision(HUDI, "; ".join(reasons))
        declined, hudi_declined = "; ".join(reasons), "; ".join(hudi_refusals)
        raise UnsupportedTableError(f"{where}: {declined} (Hudi's code: {hudi_declined})")

    def _decide_direct(self, table: HudiTable, choice: str) -> ExecutorDecision:
        """Who does the direct work: tms's own code, whoever was asked, or Hudi's code, which
        `native` cannot be given."""
        hudi = self.direct_work.by_hudi if self.direct_work is not None else None
        if hudi is None:
            return ExecutorDecision(NATIVE)  # tms does it itself, whoever was asked
        where = f"cannot run {self.action} on {table.storage.base_path}"
        if choice == NATIVE:
            raise UnsupportedTableError(f"{where}: {self._no_native()}")
        refused = hudi.refusals(table)
        if refused:
            raise UnsupportedTableError(f"{where} with Hudi's code: {'; '.join(refused)}")
        return ExecutorDecision(HUDI, self._no_native() if choice == AUTO else None)

    def _no_native(self) -> str:
        return (
            f"tms's own code has no {self.action} executor; Hudi's code runs it (executor "
            "auto or hudi)"
        )

    def schedule(
        self,
        table: HudiTable,
        params: Mapping[str, Any],
        *,
        executor: str = NATIVE,
        spark: Any = None,
    ) -> str | None:
        """Write a plan; its instant, or None when nothing is due. Parameters this service
        does not plan with are ignored (a request carries every service's). A data table
        service plans under the table lock its writers use, so that no writer starts an
        instant between the timeline the plan was made from and the plan."""
        if self.asks_direct_work(params):
            raise ValueError(
                f"{self.action} asked for work without a plan: it is done at once, not planned "
                "(run_direct_work)"
            )
        kwargs = self._arguments(params)
        if executor == HUDI and self.hudi_planner is not None:
            return self.hudi_planner.schedule(spark, table, kwargs)
        planner = self.planner
        if planner is None:
            raise ValueError(f"{self.action} has no plans")
        locked = self.plans_under_table_lock
        if not (self.checks_data_table if locked is None else locked):
            return planner(table, **kwargs)
        with table.lock.hold(table.storage):
            return planner(table, **kwargs)

    def executor(self, name: str = NATIVE) -> PlanExecutor:
        """The executor `name` of this service's plans; ValueError for one it has not."""
        try:
            return self.executors[name]
        except KeyError:
            known = ", ".join(sorted(self.executors))
            raise ValueError(f"{self.action} plans have no executor {name!r} ({known})") from None

    def execute(
        self,
        spark: Any,
        table: HudiTable,
        instant: str,
        heartbeat_interval: float,
        on_stage: StageHook | None = None,
        *,
        executor: str = NATIVE,
    ) -> ServiceResult:
        """Run the pending plan at `instant` on Spark with the executor `executor`;
        `on_stage` hears each stage's name as the execution enters it (executors that name
        their stages only)."""
        return self.executor(executor).execute(
            spark, table, instant, heartbeat_interval=heartbeat_interval, on_stage=on_stage
        )

    def cancelled(self, table: HudiTable, instant: str, heartbeat_interval: float) -> None:
        """Clean up after an execution a cancel request stopped. A cancellable plan
        (RFC-79) is cancelled on the table: the request written (a writer sees it too), its
        files rolled back, the plan aborted. Any other plan goes back to requested, as
        after a crash, to run again later."""
        if self.after_cancel is not None:
            self.after_cancel(table, instant, heartbeat_interval)
            return
        timeline = table.timeline()
        pending = timeline.get(instant)
        if pending is None or not pending.is_pending:
            return
        if cancel_requests.is_cancellable(timeline, pending):
            request_cancel(table, instant)
            execute_cancel(table, instant, heartbeat_interval=heartbeat_interval)
        elif pending.state is State.INFLIGHT:
            rollback_inflight(table, pending, heartbeat_interval=heartbeat_interval)

    def pending_plans(self, table: HudiTable) -> list[str]:
        """Requested times of this service's pending plans, oldest first."""
        return self.find_pending(table)


def _pending_on_timeline(
    pending: Callable[[Timeline], list[Instant]],
) -> Callable[[HudiTable], list[str]]:
    """Pending plans of a data table service: its instants on the table's own timeline."""
    return lambda table: [instant.requested_time for instant in pending(table.timeline())]


def _pending_cleans(timeline: Timeline) -> list[Instant]:
    return timeline.pending((Action.CLEAN,))


def _pending_log_compactions(timeline: Timeline) -> list[Instant]:
    return timeline.pending((Action.LOG_COMPACTION,))


def _leave_inflight(table: HudiTable, instant: str, heartbeat_interval: float) -> None:
    return None


def _no_plans(table: HudiTable) -> list[str]:
    return []


SERVICES: Mapping[str, TableService] = {
    COMPACTION: TableService(
        action=COMPACTION,
        planner=compaction_plan.schedule_compaction,
        executors={NATIVE: compaction.CompactionExecutor(), HUDI: HudiExecutor(COMPACTION)},
        find_pending=_pending_on_timeline(Timeline.pending_compactions),
        hudi_planner=HudiPlanner(COMPACTION),
    ),
    CLUSTERING: TableService(
        action=CLUSTERING,
        planner=clustering_plan.schedule_clustering,
        executors={NATIVE: clustering.ClusteringExecutor(), HUDI: HudiExecutor(CLUSTERING)},
        find_pending=_pending_on_timeline(Timeline.pending_clusterings),
        hudi_planner=HudiPlanner(CLUSTERING),
        declines_work=lambda table, work: clustering_plan.declines(
            table, work.planning, work.instant
        ),
    ),
    CLEAN: TableService(
        action=CLEAN,
        planner=clean_plan.schedule_clean,
        executors={NATIVE: FunctionExecutor(clean.execute_clean), HUDI: HudiExecutor(CLEAN)},
        find_pending=_pending_on_timeline(_pending_cleans),
        hudi_planner=HudiPlanner(CLEAN),
        # half-deleted files cannot come back: the clean stays inflight, the next one ends it
        after_cancel=_leave_inflight,
    ),
    METADATA_COMPACTION: TableService(
        action=METADATA_COMPACTION,
        planner=metadata_compaction.schedule,
        executors={NATIVE: metadata_compaction.MetadataCompactionExecutor()},
        find_pending=metadata_compaction.pending_plans,
        checks_data_table=False,
    ),
    INDEXING: TableService(
        action=INDEXING,
        planner=index.schedule,
        executors={
            NATIVE: FunctionExecutor(index.execute, names_stages=True),
            HUDI: HudiIndexExecutor(),
        },
        find_pending=index.pending_plans,
        hudi_planner=HudiIndexPlanner(),
        # the data table checks refuse inflight partitions (a crashed build's): it checks itself
        checks_data_table=False,
        hold_stages=index.HOLD_STAGES,
        after_cancel=index.discard,
        declines_work=lambda table, work: index.declines(table, work.planning, work.instant),
        direct_work=DirectWork(flag="drop", run=index.drop),
    ),
    LOG_COMPACTION: TableService(
        action=LOG_COMPACTION,
        planner=log_compaction_plan.schedule_log_compaction,
        executors={
            NATIVE: log_compaction.LogCompactionExecutor(),
            HUDI: HudiLogCompactionExecutor(),
        },
        find_pending=_pending_on_timeline(_pending_log_compactions),
        # tms plans as Hudi does on any table Hudi's code runs on; native declines by its own
        # rules (pending log compactions do not hold it off), its executor refusing them too
        checks_data_table=False,
        plans_under_table_lock=True,
        declines_work=lambda table, work: (log_compaction.declines(table), []),
    ),
    ARCHIVAL: TableService(
        action=ARCHIVAL,
        planner=None,
        executors={},
        find_pending=_no_plans,
        # Hudi's archiver decides what it may archive on any table it reads
        checks_data_table=False,
        direct_work=DirectWork(
            flag=None, run=archive, by_hudi=HUDI_ARCHIVER, nothing_due=nothing_to_archive
        ),
    ),
    PARTITION_TTL: TableService(
        action=PARTITION_TTL,
        planner=partition_ttl_plan.schedule_partition_ttl,
        executors={HUDI: HudiPartitionTtlExecutor()},
        find_pending=_pending_on_timeline(partition_ttl_plan.pending_partition_ttls),
        # tms plans as Hudi's KEEP_BY_TIME does; Hudi's code deletes on any table it reads
        checks_data_table=False,
        plans_under_table_lock=True,
    ),
}
"""Every table service by action, in `TABLE_SERVICE_ACTIONS` order (a test checks it)."""


def table_service(action: str) -> TableService:
    """The service of `action`; ValueError for an action that is not a table service."""
    try:
        return SERVICES[action]
    except KeyError:
        raise ValueError(f"unknown service {action!r}") from None
