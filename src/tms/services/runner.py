"""One entry point for running a table service: choose its executor, schedule when asked (or
adopt a pending plan), then execute.

The executor is chosen as a job chooses it (`TableService.decide`): `auto` runs tms's own
code where it serves the table, else Hudi's own code, whose Spark then carries Hudi's bundle.
It names the stages a job's runner names around the service's own (planning, starting
Spark), so whoever tracks the work (`tms.services.progress.tracking`) hears all of them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tms.executor_choice import AUTO, HUDI, NATIVE
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.table import HudiTable
from tms.services import progress
from tms.services.execution import ServiceResult
from tms.services.registry import ExecutorDecision, TableService, Work, table_service
from tms.spark_runtime import get_spark
from tms.spark_runtime.hudi_bundle import UNAVAILABLE_HINT, hudi_jars, hudi_spark_conf

__all__ = ["BundleJars", "ServiceRequest", "ServiceRun", "run_service"]

log = logging.getLogger(__name__)

BundleJars = Callable[[], list[str]]
"""Obtains the jars of Hudi's Spark bundle for a run Hudi's code serves; [] when there are
none. Called only then: a run tms's own code serves needs no bundle."""


@dataclass(frozen=True)
class ServiceRequest:
    service: str
    """One of `TABLE_SERVICE_ACTIONS`: compaction | clustering | clean | metadata-compaction
    | indexing"""
    instant: str | None = None
    master: str = "local[*]"
    parallelism: int | None = None
    strategy: str = "all"
    target_file_size: int = 128 * 1024 * 1024
    small_file_limit: int = 100 * 1024 * 1024
    sort_columns: list[str] = field(default_factory=list)
    policy: str = "KEEP_LATEST_COMMITS"
    retain: int = 10
    partitions: tuple[str, ...] = ()
    """indexing: the metadata partitions to build (or drop)."""
    drop: bool = False
    """indexing: drop `partitions` instead of building them."""
    heartbeat_interval: float = 60.0
    jvm_output: Path | None = None
    """Where the Spark driver's JVM writes its stdout and stderr when this run starts it
    (None: this process's)."""
    executor: str = AUTO
    """Who plans and runs the plan (`tms.executor_choice`): `auto` is tms's own code where it
    serves the table and the work, else Hudi's code."""

    def planning_params(self) -> dict[str, Any]:
        """Every service's planning parameters; each service takes the ones it plans with."""
        return {
            "strategy": self.strategy,
            "target_file_size": self.target_file_size,
            "small_file_limit": self.small_file_limit,
            "sort_columns": self.sort_columns,
            "policy": self.policy,
            "retained": self.retain,
            "partitions": self.partitions,
            "drop": self.drop,
        }

    def work(self) -> Work:
        """What the executors' choice looks at: the planning parameters of a run that plans,
        the plan of one that names it."""
        return Work(None if self.instant else self.planning_params(), self.instant)


@dataclass(frozen=True)
class ServiceRun:
    """What a run did: who ran it and why tms's own code declined (`decision`), the
    execution's figures (None when nothing was scheduled, or an index build's partitions
    were dropped), and whether the plan was a pending one this run adopted."""

    decision: ExecutorDecision
    result: ServiceResult | None = None
    adopted: bool = False

    def figures(self) -> dict[str, str | None]:
        """Who ran the work and why native declined it, as the service reports them."""
        return {
            "executed_by": self.decision.executor,
            "native_declined": self.decision.native_declined,
        }


def run_service(
    table: HudiTable, request: ServiceRequest, bundle: BundleJars = hudi_jars
) -> ServiceRun:
    """Choose the executor, schedule a plan unless `request.instant` names one or a pending
    plan is there to adopt (as a job adopts one), then execute it on Spark.

    Tables no executor asked for can serve, and Hudi's code chosen with no bundle from
    `bundle`, are refused before anything is written (`UnsupportedTableError`)."""
    service = table_service(request.service)
    drops = request.drop and request.instant is None
    decision = service.decide(table, request.executor, request.work())
    if drops:
        decision = ExecutorDecision(NATIVE)  # tms drops partitions itself, whoever was asked
    executor = decision.executor
    conf = {"spark.default.parallelism": str(request.parallelism)} if request.parallelism else {}
    if executor == HUDI:
        conf.update(hudi_spark_conf(_bundle_or_refuse(service, table, decision, bundle)))
    spark: Any = None
    instant = request.instant
    adopted = False
    if instant is None:
        if executor == HUDI:  # Hudi's planner plans on Spark
            spark = _start_spark(request, "planning", conf)
        progress.enter("planning")
        instant = None if drops else _pending_plan(service, table)
        adopted = instant is not None
        if instant is None:
            instant = service.schedule(
                table, request.planning_params(), executor=executor, spark=spark
            )
        if instant is None:
            return ServiceRun(decision)
    if spark is None:
        spark = _start_spark(request, instant, conf)
    result = service.execute(
        spark, table, instant, request.heartbeat_interval, progress.enter, executor=executor
    )
    return ServiceRun(decision, result, adopted)


def _bundle_or_refuse(
    service: TableService, table: HudiTable, decision: ExecutorDecision, bundle: BundleJars
) -> list[str]:
    """The bundle's jars for Hudi's code; refused, naming what to set, when there are none."""
    jars = bundle()
    if jars:
        return jars
    declined = f" (native declined: {decision.native_declined})" if decision.native_declined else ""
    raise UnsupportedTableError(
        f"cannot run {service.action} on {table.storage.base_path} with Hudi's code{declined}: "
        f"Hudi's Spark bundle is missing; {UNAVAILABLE_HINT}"
    )


def _pending_plan(service: TableService, table: HudiTable) -> str | None:
    """The oldest pending plan of the service, which this run runs rather than planning: a
    plan left behind (a crashed job's, a writer's) is otherwise skipped by every later
    plan."""
    pending = service.pending_plans(table)
    if not pending:
        return None
    log.info("adopted pending %s plan %s", service.action, pending[0])
    return pending[0]


def _start_spark(request: ServiceRequest, instant: str, conf: dict[str, str]) -> Any:
    progress.enter("starting Spark")
    spark = get_spark(
        request.master,
        app_name=f"tms-{request.service}-{instant}",
        conf=conf,
        jvm_output=request.jvm_output,
    )
    progress.watch_spark(spark)
    return spark
