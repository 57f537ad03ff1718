"""The job's default steps between its runner and the table services: plan, find pending
plans, start Spark, run the plan; and the table's own cancel request, which the heartbeat
checks. What to run comes parsed from the spec (`tms.jobs.job.Job`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tms.hudi.storage.options import task_environment
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.jobs.client import JobSpec
from tms.jobs.job import Job
from tms.planning import BadJobInput
from tms.services.execution import ServiceResult
from tms.services.plan_executor import StageHook
from tms.services.registry import table_service
from tms.spark_runtime import get_spark

__all__ = [
    "execute_plan",
    "give_tasks_storage_options",
    "pending_plans",
    "schedule_plan",
    "spark_session",
    "table_cancel_check",
]


def schedule_plan(job: Job, table: HudiTable) -> str | None:
    """Write the plan of a plan-less operation; its instant, or None when nothing is due."""
    return job.schedule(table)


def pending_plans(table: HudiTable, action: str) -> list[str]:
    """Pending plans of `action` on the timeline, oldest first.

    A job that scheduled a plan and died before reporting it leaves one behind that no
    operation tracks; the next plan-less job of that action adopts it instead of leaving it
    pending for good (its file groups would be skipped by every later plan).
    """
    return table_service(action).pending_plans(table)


def execute_plan(
    job: Job, table: HudiTable, instant: str, spark: Any, on_stage: StageHook | None = None
) -> ServiceResult:
    """Run the pending plan at `instant` with the job's executor."""
    return job.execute(table, instant, spark, on_stage)


def table_cancel_check(table: HudiTable, instant: str) -> Callable[[], str | None] | None:
    """For a cancellable plan (RFC-79), a check of the table's cancel folder the heartbeat
    makes (one GET): the reason when a writer, or anyone, requested the cancel; None for a
    plan that cannot be cancelled, which nothing on the table can stop."""
    timeline = table.timeline()
    pending = timeline.get(instant)
    if pending is None or not pending.is_pending:
        return None
    if not cancel_requests.is_cancellable(timeline, pending):
        return None
    storage = table.storage

    def check() -> str | None:
        if not cancel_requests.is_cancel_requested(storage, instant):
            return None
        return f"a cancel was requested on the table ({cancel_requests.cancel_path(instant)})"

    return check


def spark_session(spec: JobSpec, instant: str) -> Any:
    """The session spark-submit prepared: its conf (master, memory, `--conf`s) is read back
    and handed to `get_spark`, whose defaults only fill what the submit left unset. The
    table's storage options reach its tasks through `give_tasks_storage_options`. The conf
    is read through the JVM spark-submit started (a `SparkConf` made before it is reached
    holds nothing, and the session would fall back to a local master)."""
    from pyspark import SparkConf, SparkContext  # pyspark only where a job starts Spark

    SparkContext._ensure_initialized()  # the gateway to spark-submit's JVM
    conf = dict(SparkConf().getAll())
    master = conf.pop("spark.master", None)
    name = conf.pop("spark.app.name", f"tms-{spec.action}-{instant}")
    if spec.parallelism is not None:
        conf.setdefault("spark.default.parallelism", str(spec.parallelism))
    spark = get_spark(master, app_name=name, conf=conf)
    give_tasks_storage_options(spec, spark)
    return spark


def give_tasks_storage_options(spec: JobSpec, spark: Any) -> None:
    """Spark tasks open the table by URI (`Storage(uri)`), without options: they get the
    table's options as the standard variables of the store's library (`AWS_*` for s3), set
    in the SparkContext's environment (`sc.environment`), which PySpark ships with each
    Python function to the worker that runs it.

    Chosen over carrying the options in the task closures because every service's tasks get
    them without a change to any of them, and over `spark.executorEnv.*` or `--conf`
    because those are Spark configuration: on the spark-submit command line, in the event
    log and in the UI's environment tab. The environment is shipped to executors inside the
    serialized tasks and set on their Python workers only; nothing is logged. The job's own
    process takes them as well, for the driver's own calls by URI (the metadata table's file
    groups a `files` build writes on the driver): it runs this one attempt only."""
    if not spec.storage_options:
        return
    try:
        variables = task_environment(spec.base_path, spec.storage_options)
    except ValueError as exc:
        raise BadJobInput(f"the table's storage options: {exc}") from None
    spark.sparkContext.environment.update(variables)
    os.environ.update(variables)
