"""From a job spec to the table service functions: plan, Spark session, execution."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tms.hudi.timeline.instant import Action
from tms.jobs.params import BadJobInput, schedule_kwargs

if TYPE_CHECKING:
    from tms.hudi.table import HudiTable
    from tms.jobs.client import JobSpec
    from tms.services.execution import ServiceResult

__all__ = ["ACTIONS", "execute_plan", "pending_plans", "schedule_plan", "spark_session"]

ACTIONS = ("compaction", "clustering", "clean")


def _check_action(action: str) -> None:
    if action not in ACTIONS:
        raise BadJobInput(f"action {action!r} is not supported by tms jobs ({', '.join(ACTIONS)})")


def schedule_plan(spec: JobSpec, table: HudiTable) -> str | None:
    """Write the plan of a plan-less operation; its instant, or None when nothing is due."""
    from tms.services import clean, clustering, compaction

    _check_action(spec.action)
    kwargs = schedule_kwargs(spec.action, spec.extra_params)
    if spec.action == "compaction":
        return compaction.schedule_compaction(table, **kwargs)
    if spec.action == "clustering":
        return clustering.schedule_clustering(table, **kwargs)
    return clean.schedule_clean(table, **kwargs)


def pending_plans(table: HudiTable, action: str) -> list[str]:
    """Pending plans of `action` on the timeline, oldest first.

    A job that scheduled a plan and died before reporting it leaves one behind that no
    operation tracks; the next plan-less job of that action adopts it instead of leaving it
    pending for good (its file groups would be skipped by every later plan).
    """
    _check_action(action)
    timeline = table.timeline()
    if action == "compaction":
        plans = timeline.pending_compactions()
    elif action == "clustering":
        plans = timeline.pending_clusterings()
    else:
        plans = timeline.pending((Action.CLEAN,))
    return [instant.requested_time for instant in plans]


def spark_session(spec: JobSpec, instant: str) -> Any:
    """The session spark-submit prepared: its conf (master, memory, `--conf`s) is read back
    and handed to `get_spark`, whose defaults only fill what the submit left unset."""
    from pyspark import SparkConf

    from tms.spark_runtime import get_spark

    conf = dict(SparkConf().getAll())
    master = conf.pop("spark.master", None)
    name = conf.pop("spark.app.name", f"tms-{spec.action}-{instant}")
    if spec.parallelism is not None:
        conf.setdefault("spark.default.parallelism", str(spec.parallelism))
    return get_spark(master, app_name=name, conf=conf)


def execute_plan(spec: JobSpec, table: HudiTable, instant: str, spark: Any) -> ServiceResult:
    """Run the pending plan at `instant`; the Hudi heartbeat beats as often as ours."""
    from tms.services import clean, clustering, compaction

    _check_action(spec.action)
    interval = spec.heartbeat_interval_seconds
    if spec.action == "compaction":
        return compaction.execute_compaction(spark, table, instant, heartbeat_interval=interval)
    if spec.action == "clustering":
        return clustering.execute_clustering(spark, table, instant, heartbeat_interval=interval)
    return clean.execute_clean(spark, table, instant, heartbeat_interval=interval)
