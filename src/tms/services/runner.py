"""One entry point for running a table service: schedule when asked, then execute."""

from __future__ import annotations

from dataclasses import dataclass, field

from tms.hudi.table import HudiTable
from tms.services.execution import ServiceResult
from tms.spark_runtime import get_spark


@dataclass(frozen=True)
class ServiceRequest:
    service: str
    """compaction | clustering | clean"""
    instant: str | None = None
    master: str = "local[*]"
    parallelism: int | None = None
    strategy: str = "all"
    target_file_size: int = 128 * 1024 * 1024
    small_file_limit: int = 100 * 1024 * 1024
    sort_columns: list[str] = field(default_factory=list)
    policy: str = "KEEP_LATEST_COMMITS"
    retain: int = 10
    heartbeat_interval: float = 60.0


def run_service(table: HudiTable, request: ServiceRequest) -> ServiceResult | None:
    """Schedule a plan unless `request.instant` names one, then execute it on Spark.

    Returns None when there was nothing to schedule. Unsupported tables are refused before
    anything is written.
    """
    from tms.services import clean, clustering, compaction

    table.ensure_supported()
    instant = request.instant
    if instant is None:
        if request.service == "compaction":
            instant = compaction.schedule_compaction(table, strategy=request.strategy)
        elif request.service == "clustering":
            instant = clustering.schedule_clustering(
                table,
                target_file_size=request.target_file_size,
                small_file_limit=request.small_file_limit,
                sort_columns=request.sort_columns,
            )
        elif request.service == "clean":
            instant = clean.schedule_clean(table, policy=request.policy, retained=request.retain)
        else:
            raise ValueError(f"unknown service {request.service!r}")
        if instant is None:
            return None
    conf = {"spark.default.parallelism": str(request.parallelism)} if request.parallelism else {}
    spark = get_spark(request.master, app_name=f"tms-{request.service}-{instant}", conf=conf)
    if request.service == "compaction":
        return compaction.execute_compaction(
            spark, table, instant, heartbeat_interval=request.heartbeat_interval
        )
    if request.service == "clustering":
        return clustering.execute_clustering(
            spark, table, instant, heartbeat_interval=request.heartbeat_interval
        )
    if request.service == "clean":
        return clean.execute_clean(
            spark, table, instant, heartbeat_interval=request.heartbeat_interval
        )
    raise ValueError(f"unknown service {request.service!r}")
