"""One entry point for running a table service: schedule when asked, then execute.

It names the stages a job's runner names around the service's own (planning, starting
Spark), so whoever tracks the work (`tms.services.progress.tracking`) hears all of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tms.hudi.table import HudiTable
from tms.services import progress
from tms.services.execution import ServiceResult
from tms.services.registry import table_service
from tms.spark_runtime import get_spark


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


def run_service(table: HudiTable, request: ServiceRequest) -> ServiceResult | None:
    """Schedule a plan unless `request.instant` names one, then execute it on Spark.

    Returns None when there was nothing to schedule. Unsupported tables are refused before
    anything is written.
    """
    service = table_service(request.service)
    service.ensure_supported(table)
    instant = request.instant
    if instant is None:
        progress.enter("planning")
        instant = service.schedule(table, request.planning_params())
        if instant is None:
            return None
    conf = {"spark.default.parallelism": str(request.parallelism)} if request.parallelism else {}
    progress.enter("starting Spark")
    spark = get_spark(
        request.master,
        app_name=f"tms-{request.service}-{instant}",
        conf=conf,
        jvm_output=request.jvm_output,
    )
    progress.watch_spark(spark)
    return service.execute(spark, table, instant, request.heartbeat_interval)
