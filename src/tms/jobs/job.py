"""What one attempt runs, read once from its job spec: the table service of its action and the
executor of its plans, the table's lock, the instant to run or the parameters to plan with,
and how often to heartbeat. Everything the job asks of its service it asks of this."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tms.executor_choice import HUDI, NATIVE
from tms.hudi.actions import TABLE_SERVICE_ACTIONS
from tms.hudi.locks import LockSpec
from tms.hudi.table import HudiTable
from tms.jobs.client import JobSpec
from tms.planning import BadJobInput, lock_settings, schedule_kwargs
from tms.services.execution import ServiceResult
from tms.services.plan_executor import StageHook
from tms.services.registry import ExecutorDecision, TableService, Work, table_service

__all__ = ["Job"]


@dataclass(frozen=True)
class Job:
    """An attempt's work. `planning` is None for an operation whose plan exists (`instant`):
    its planning parameters are not read."""

    spec: JobSpec
    service: TableService
    lock: LockSpec
    planning: Mapping[str, Any] | None
    executor: str = NATIVE
    """Who plans and runs the plan (`TableService.executors`), once `decide` chose."""
    spark: Any = field(default=None, repr=False, compare=False)
    """The Spark that Hudi's planner plans on (`plans_on_spark`), once started."""

    @classmethod
    def of(cls, spec: JobSpec) -> Job:
        """`BadJobInput` for an action tms jobs do not run or planning parameters its service
        cannot use; `UnsupportedTableError` for a lock provider tms cannot take."""
        if spec.action not in TABLE_SERVICE_ACTIONS:
            raise BadJobInput(
                f"action {spec.action!r} is not supported by tms jobs "
                f"({', '.join(TABLE_SERVICE_ACTIONS)})"
            )
        lock = LockSpec.from_settings(lock_settings(spec.extra_params))
        planning = None
        if spec.instant is None:
            planning = schedule_kwargs(spec.action, spec.extra_params)
        return cls(spec, table_service(spec.action), lock, planning)

    @property
    def action(self) -> str:
        return self.spec.action

    @property
    def instant(self) -> str | None:
        """The plan the operation runs; None until its job plans one."""
        return self.spec.instant

    @property
    def heartbeat_interval(self) -> float:
        """The Hudi heartbeat of the plan beats as often as the job's."""
        return self.spec.heartbeat_interval_seconds

    @property
    def direct(self) -> bool:
        """Whether the operation asks for its service's direct work (an index's drop): done
        at once, with no plan to adopt, write or run (`TableService.direct_work`). An
        operation with a plan has no planning parameters, so it asks for none, but of a
        service whose every operation is direct work (archival)."""
        return self.service.asks_direct_work(self.planning)

    @property
    def direct_on_spark(self) -> bool:
        """Whether its direct work runs on Spark, started first with Hudi's bundle (archival:
        Hudi's archiver)."""
        direct = self.service.direct_work
        return self.direct and direct is not None and direct.on_spark

    def direct_idle(self, table: HudiTable) -> dict[str, Any] | None:
        """The figures of its direct work when the table shows nothing is due (no Spark to
        start); None when work is due (`TableService.direct_work_idle`)."""
        return self.service.direct_work_idle(table, self.planning or {})

    def run_direct(self, table: HudiTable, spark: Any = None) -> dict[str, Any]:
        """Do the direct work the operation asks for (on `spark` when it runs there); its
        figures."""
        return self.service.run_direct_work(table, self.planning or {}, spark)

    def open_table(self) -> HudiTable:
        """The table, with its storage options and its writers' lock."""
        return HudiTable.open(
            self.spec.base_path, storage_options=self.spec.storage_options, lock=self.lock
        )

    def decide(self, table: HudiTable) -> tuple[Job, ExecutorDecision]:
        """This job with the executor that runs it (`TableService.decide`), before anything
        is written: a table no executor asked for can keep correct is refused here."""
        decision = self.service.decide(
            table, self.spec.executor, Work(self.planning, self.spec.instant)
        )
        return replace(self, executor=decision.executor), decision

    @property
    def plans_on_spark(self) -> bool:
        """Whether planning needs Spark started first: Hudi's planner runs on it. A service
        tms plans for Hudi's executor (log compaction) starts Spark once its plan is written."""
        hudi_plans = self.service.hudi_planner is not None
        return (
            self.executor == HUDI and hudi_plans and self.planning is not None and not self.direct
        )

    def with_spark(self, spark: Any) -> Job:
        return replace(self, spark=spark)

    def schedule(self, table: HudiTable) -> str | None:
        """Write the plan of a plan-less operation; its instant, or None when nothing is due."""
        return self.service.schedule(
            table, self.planning or {}, executor=self.executor, spark=self.spark
        )

    def execute(
        self, table: HudiTable, instant: str, spark: Any, on_stage: StageHook | None = None
    ) -> ServiceResult:
        """Run the pending plan at `instant` with the job's executor; `on_stage` hears the
        stages of executors that name them."""
        return self.service.execute(
            spark, table, instant, self.heartbeat_interval, on_stage, executor=self.executor
        )

    def holds_stage(self, stage: str) -> bool:
        """Whether a cancel request no longer stops the work once it enters `stage` (an index
        build's catch-up and completion)."""
        return stage in self.service.hold_stages

    def clean_up_cancelled(self, table: HudiTable, instant: str) -> None:
        """Undo what the work a cancel stopped left on the table (`TableService.cancelled`)."""
        self.service.cancelled(table, instant, self.heartbeat_interval)
