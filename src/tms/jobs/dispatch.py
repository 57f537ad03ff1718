"""From a job spec to the table service functions: plan, Spark session, execution."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tms.hudi.actions import INDEXING, TABLE_SERVICE_ACTIONS
from tms.planning import BadJobInput, lock_settings, schedule_kwargs

if TYPE_CHECKING:
    from tms.hudi.locks import LockSpec
    from tms.hudi.table import HudiTable
    from tms.jobs.client import JobSpec
    from tms.services.execution import ServiceResult

__all__ = [
    "ACTIONS",
    "INDEXING",
    "adopts_pending_plans",
    "clean_up_cancelled",
    "ensure_supported",
    "execute_plan",
    "give_tasks_storage_options",
    "holds_stage",
    "lock_spec",
    "pending_plans",
    "schedule_plan",
    "spark_session",
    "table_cancel_check",
    "unplanned_figures",
]

ACTIONS = TABLE_SERVICE_ACTIONS


def _check_action(action: str) -> None:
    if action not in ACTIONS:
        raise BadJobInput(f"action {action!r} is not supported by tms jobs ({', '.join(ACTIONS)})")


def ensure_supported(spec: JobSpec, table: HudiTable) -> None:
    """Refuse, before anything is written, a table the operation's service would damage."""
    from tms.services.registry import table_service

    _check_action(spec.action)
    table_service(spec.action).ensure_supported(table)


def lock_spec(spec: JobSpec) -> LockSpec:
    """How the table's writers lock it, from the operation's `hoodie.write.lock.*` settings
    (its own or its table's); `UnsupportedTableError` for a provider tms cannot take."""
    from tms.hudi.locks import LockSpec

    return LockSpec.from_settings(lock_settings(spec.extra_params))


def schedule_plan(spec: JobSpec, table: HudiTable) -> str | None:
    """Write the plan of a plan-less operation; its instant, or None when nothing is due."""
    from tms.services.registry import table_service

    _check_action(spec.action)
    kwargs = schedule_kwargs(spec.action, spec.extra_params)
    return table_service(spec.action).schedule(table, kwargs)


def _drops(spec: JobSpec) -> bool:
    """An index operation that drops partitions: done when "scheduled", with no plan."""
    return spec.action == INDEXING and bool(
        schedule_kwargs(spec.action, spec.extra_params).get("drop", False)
    )


def holds_stage(spec: JobSpec, stage: str) -> bool:
    """Whether a cancel request no longer stops the work once it enters `stage` (an index
    build's catch-up and completion)."""
    from tms.services.registry import table_service

    return stage in table_service(spec.action).hold_stages


def clean_up_cancelled(spec: JobSpec, table: HudiTable, instant: str) -> None:
    """Undo what the work a cancel stopped left on the table (`TableService.cancelled`)."""
    from tms.services.registry import table_service

    table_service(spec.action).cancelled(table, instant, spec.heartbeat_interval_seconds)


def table_cancel_check(
    spec: JobSpec, table: HudiTable, instant: str
) -> Callable[[], str | None] | None:
    """For a cancellable plan (RFC-79), a check of the table's cancel folder the heartbeat
    makes (one GET): the reason when a writer, or anyone, requested the cancel; None for a
    plan that cannot be cancelled, which nothing on the table can stop."""
    from tms.hudi.timeline import cancel

    timeline = table.timeline()
    pending = timeline.get(instant)
    if pending is None or not pending.is_pending or not cancel.is_cancellable(timeline, pending):
        return None
    storage = table.storage

    def check() -> str | None:
        if not cancel.is_cancel_requested(storage, instant):
            return None
        return f"a cancel was requested on the table ({cancel.cancel_path(instant)})"

    return check


def adopts_pending_plans(spec: JobSpec) -> bool:
    """Whether a plan-less operation runs a pending plan it finds rather than planning; a
    drop has nothing to run, it drops."""
    return not _drops(spec)


def unplanned_figures(spec: JobSpec) -> dict[str, Any]:
    """The result of an operation whose scheduling wrote no plan."""
    if _drops(spec):
        partitions = schedule_kwargs(spec.action, spec.extra_params)["partitions"]
        return {"dropped": ",".join(partitions)}
    return {"nothing_to_do": True}


def pending_plans(table: HudiTable, action: str) -> list[str]:
    """Pending plans of `action` on the timeline, oldest first.

    A job that scheduled a plan and died before reporting it leaves one behind that no
    operation tracks; the next plan-less job of that action adopts it instead of leaving it
    pending for good (its file groups would be skipped by every later plan).
    """
    from tms.services.registry import table_service

    _check_action(action)
    return table_service(action).pending_plans(table)


def spark_session(spec: JobSpec, instant: str) -> Any:
    """The session spark-submit prepared: its conf (master, memory, `--conf`s) is read back
    and handed to `get_spark`, whose defaults only fill what the submit left unset. The
    table's storage options reach its tasks through `give_tasks_storage_options`."""
    from pyspark import SparkConf

    from tms.spark_runtime import get_spark

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
    from tms.hudi.storage.options import task_environment

    if not spec.storage_options:
        return
    try:
        variables = task_environment(spec.base_path, spec.storage_options)
    except ValueError as exc:
        raise BadJobInput(f"the table's storage options: {exc}") from None
    spark.sparkContext.environment.update(variables)
    os.environ.update(variables)


def execute_plan(
    spec: JobSpec,
    table: HudiTable,
    instant: str,
    spark: Any,
    on_stage: Callable[[str], None] | None = None,
) -> ServiceResult:
    """Run the pending plan at `instant`; the Hudi heartbeat beats as often as ours.
    `on_stage` hears the stages of services that name them."""
    from tms.services.registry import table_service

    _check_action(spec.action)
    return table_service(spec.action).execute(
        spark, table, instant, spec.heartbeat_interval_seconds, on_stage=on_stage
    )
