"""A pause of Spark tasks after their work, for tests that lose an executor while tasks run.

Off unless the executor's environment names a folder in `TMS_TASK_PAUSE_DIR` (a Spark
worker started with it passes it to its executors; the service never sets it). Then every
task attempt, once its work is done and before it reports, leaves a file there naming
itself (`<stage>-<partition>-<attempt number>-<write token>-<pid>.task`), and a first attempt
waits until a file `release` appears: its files are written, its result not yet sent, so
whoever watches the folder can kill its executor at that moment and see Spark run the task
again (as attempt number 1 or later, which never waits).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["ENV", "RELEASE", "after_task_work", "task_file_name"]

ENV = "TMS_TASK_PAUSE_DIR"
RELEASE = "release"
_POLL_SECONDS = 0.05


def task_file_name(stage: int, partition: int, attempt_number: int, write_token: str) -> str:
    return f"{stage}-{partition}-{attempt_number}-{write_token}-{os.getpid()}.task"


def after_task_work(stage: int, partition: int, attempt_number: int, write_token: str) -> None:
    """Leave this attempt's file and, for a first attempt, wait for the release (when the
    pause is on)."""
    folder = os.environ.get(ENV)
    if not folder:
        return
    root = Path(folder)
    name = task_file_name(stage, partition, attempt_number, write_token)
    (root / name).write_text("")
    while attempt_number == 0 and not (root / RELEASE).exists():
        time.sleep(_POLL_SECONDS)
