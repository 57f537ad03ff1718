"""A pause of Spark tasks after their work, for tests that lose an executor while tasks run.

Off unless the executor's environment names a folder in `TMS_TASK_PAUSE_DIR` (a Spark
worker started with it passes it to its executors; the service never sets it). Then every
task attempt that writes a table's files (the table services' tasks, the index build's),
once its files are written and before it reports, leaves a file there naming itself
(`<stage>-<partition>-<attempt number>-<write token>-<pid>.task`), and a first attempt
waits until a file `release` appears: whoever watches the folder can kill its executor at
that moment and see Spark run the task again (as attempt number 1 or later, which never
waits). The same moment is the step `tasks writing` of `tms.testing.fault_pause`, which holds
the job's own tasks for tests that kill the job.
"""

from __future__ import annotations

import os
from pathlib import Path

from tms.testing.fault_pause import hold, pause_point

__all__ = ["ENV", "RELEASE", "TASKS_WRITING", "after_task_work"]

ENV = "TMS_TASK_PAUSE_DIR"
RELEASE = "release"
TASKS_WRITING = "tasks writing"
"""The fault pause step of a task whose work is done, unless its job names another."""


def after_task_work(step: str = TASKS_WRITING) -> None:
    """In a Spark task whose files are written: hold at the fault pause `step`, then leave
    this attempt's file and, for a first attempt, wait for the release (when the pause is
    on)."""
    pause_point(step)
    folder = os.environ.get(ENV)
    if not folder:
        return
    from pyspark import TaskContext  # on the executor's Python worker, which has Spark

    context = TaskContext.get()
    if context is None:
        return
    stage, partition, number = context.stageId(), context.partitionId(), context.attemptNumber()
    token = f"{partition}-{stage}-{context.taskAttemptId()}"  # Hudi's write token
    root = Path(folder)
    announce = root / f"{stage}-{partition}-{number}-{token}-{os.getpid()}.task"
    if number == 0:
        hold(announce, root / RELEASE)
    else:
        announce.write_text(str(os.getpid()))
