"""Running one Spark task per unit of work of a table service.

Work is distributed as file groups (or clustering groups): each becomes one Spark task that
reads and writes its own files on storage and returns only small figures to the driver,
among them the storage requests it made: the driver records them as its own
(`tms.hudi.storage.requests`), so a `counting()` block around a service counts its tasks'
requests too (those of a task attempt that failed and was retried are not counted). The
job's progress (`tms.services.progress`) hears how many file groups the Spark job has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tms.hudi.storage.requests import RequestKind, counting, record
from tms.services import progress
from tms.spark_runtime.zip_directories import read_zip_directories_once
from tms.testing.task_pause import TASKS_WRITING, after_task_work

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class TaskInfo:
    """Where a task runs; Hudi's write token is made of these numbers."""

    partition_id: int
    stage_id: int
    attempt_id: int

    @property
    def write_token(self) -> str:
        return f"{self.partition_id}-{self.stage_id}-{self.attempt_id}"


def current_task_info() -> TaskInfo:
    """The running Spark task's numbers (zeros outside a task)."""
    from pyspark import TaskContext  # on the executor's Python worker, which has Spark

    context = TaskContext.get()
    if context is None:
        return TaskInfo(0, 0, 0)
    return TaskInfo(context.partitionId(), context.stageId(), context.taskAttemptId())


def run_tasks(
    spark: SparkSession,
    func: Callable[[T, TaskInfo], R],
    items: Sequence[T],
    description: str = "tms",
    *,
    file_groups: bool = True,
    pause_step: str = TASKS_WRITING,
) -> list[R]:
    """Run `func` on each item in its own Spark task; returns the results in item order.

    Items and results must be small and picklable (plans in, figures out): data never passes
    through the driver. `file_groups`: the items are file groups (or clustering groups),
    counted in the work's progress. `pause_step`: the fault tests' name for the moment each
    task's work is done (`tms.testing.task_pause`), where one job runs two services' tasks.
    """
    if not items:
        return []
    sc = spark.sparkContext
    sc.setJobDescription(description)
    indexed = list(enumerate(items))
    rdd = sc.parallelize(indexed, len(indexed))
    if file_groups:
        progress.tasks_started(len(indexed))
    results: list[tuple[int, R, dict[str, int]]] = rdd.map(_TaskCall(func, pause_step)).collect()
    if file_groups:
        progress.tasks_done(len(indexed))
    record_task_requests(requests for _, _, requests in results)
    return [result for _, result, _ in sorted(results, key=lambda triple: triple[0])]


def record_task_requests(counts: Iterable[dict[str, int]]) -> None:
    """The storage requests Spark tasks made, as the driver's own (`counting()`)."""
    for requests in counts:
        for kind, n in requests.items():
            record(RequestKind(kind), n)


class _TaskCall:
    """Picklable wrapper that hands the task its TaskInfo and counts its storage requests."""

    def __init__(self, func: Callable[[Any, TaskInfo], Any], pause_step: str) -> None:
        self.func = func
        self.pause_step = pause_step

    def __call__(self, pair: tuple[int, Any]) -> tuple[int, Any, dict[str, int]]:
        read_zip_directories_once()  # the worker's next tasks start without reading them
        info = current_task_info()
        with counting() as requests:
            result = self.func(pair[1], info)
        after_task_work(self.pause_step)
        return pair[0], result, requests.as_dict()
