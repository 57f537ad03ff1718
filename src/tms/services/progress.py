"""How far a table service has got, for whoever runs it to report (a job's heartbeats).

The services name the stage they enter (`enter`: planning, compacting, committing, syncing
metadata…) and `run_tasks` says how many file groups its Spark job works on and when they
are all done; the caller reads a `Progress` it installed for the work (`tracking`) from any
thread. Without one installed every call here does nothing: the services run the same in a
test, in `tms run` or in a job. Between those two points, the file groups done while the
Spark job runs come from Spark itself (`spark_file_groups_done`).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Progress",
    "ProgressSnapshot",
    "enter",
    "spark_file_groups_done",
    "tasks_done",
    "tasks_started",
    "tracking",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProgressSnapshot:
    stage: str
    file_groups_done: int | None = None
    file_groups_planned: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "file_groups_done": self.file_groups_done,
            "file_groups_planned": self.file_groups_planned,
        }


class Progress:
    """The stage and file group counts of one piece of work; read and written from any
    thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stage: str | None = None
        self._planned: int | None = None
        self._done: int | None = None
        self.on_change: Callable[[], None] | None = None
        """Called (in the work's thread) when the stage changes or a Spark job starts: a
        reporter may tell at once."""

    def enter(self, stage: str) -> None:
        """A new stage. The file group counts stay those of the last Spark job: what a
        commit after it writes is what those file groups made."""
        with self._lock:
            changed, self._stage = self._stage != stage, stage
        if changed:
            self._changed()

    def tasks_started(self, planned: int) -> None:
        """A Spark job of `planned` file groups starts (the counts start again)."""
        with self._lock:
            self._planned, self._done = planned, 0
        self._changed()

    def tasks_done(self, done: int) -> None:
        """At least `done` file groups are finished (never goes back)."""
        with self._lock:
            if self._planned is not None:
                self._done = max(self._done or 0, min(done, self._planned))

    def _changed(self) -> None:
        listener = self.on_change
        if listener is not None:
            listener()

    def snapshot(self) -> ProgressSnapshot | None:
        """Now; None before the first stage."""
        with self._lock:
            if self._stage is None:
                return None
            return ProgressSnapshot(self._stage, self._done, self._planned)


_CURRENT: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "tms_progress", default=None
)


@contextmanager
def tracking(progress: Progress) -> Iterator[Progress]:
    """Report the work done in this block (this thread and the threads started with a copy
    of its context) to `progress`."""
    token = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(token)


def enter(stage: str) -> None:
    """The work enters `stage` (a short name)."""
    progress = _CURRENT.get()
    if progress is not None:
        progress.enter(stage)


def tasks_started(planned: int) -> None:
    """A Spark job of `planned` tasks, one per file group, starts."""
    progress = _CURRENT.get()
    if progress is not None:
        progress.tasks_started(planned)


def tasks_done(done: int) -> None:
    progress = _CURRENT.get()
    if progress is not None:
        progress.tasks_done(done)


def spark_file_groups_done(spark: Any, job_group: str | None, planned: int) -> int | None:
    """Tasks completed so far by the running Spark job of `job_group` (None: the jobs of no
    group, a job's own application), read from Spark's status tracker; None when no running
    job there has `planned` tasks (another Spark job, or none running)."""
    try:
        tracker = spark.sparkContext.statusTracker()
        best: int | None = None
        for job_id in tracker.getJobIdsForGroup(job_group):
            job = tracker.getJobInfo(job_id)
            if job is None or str(job.status) != "RUNNING":
                continue
            stages = [tracker.getStageInfo(s) for s in job.stageIds]
            known = [s for s in stages if s is not None]
            if known and sum(s.numTasks for s in known) == planned:
                done = sum(s.numCompletedTasks for s in known)
                best = done if best is None else max(best, done)
        return best
    except Exception as exc:  # a stopping context: the driver's own figures stand
        log.debug("cannot read Spark's status tracker: %r", exc)
        return None
