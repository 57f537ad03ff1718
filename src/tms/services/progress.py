"""How far a table service has got, for whoever runs it to report (a job's heartbeats).

The services name the stage they enter (`enter`: planning, compacting, committing, syncing
metadata…) and `run_tasks` says how many file groups its Spark job works on and when they
are all done; the caller reads a `Progress` it installed for the work (`tracking`) from any
thread. Without one installed every call here does nothing: the services run the same in a
test, in `tms run` or in a job. Between those two points, the file groups done while the
Spark job runs come from Spark itself (`Progress.now`, once the work's Spark is known:
`watch_spark`). A job's heartbeats and `tms run`'s progress lines both read `Progress.now`.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tms.testing.fault_pause import pause_point

__all__ = [
    "Progress",
    "ProgressSnapshot",
    "enter",
    "spark_file_groups_done",
    "tasks_done",
    "tasks_started",
    "tracking",
    "watch_spark",
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

    def describe(self) -> str:
        """One line for whoever watches the work: `compacting, 2/4 file groups` (`?` done
        while no count came yet)."""
        planned = self.file_groups_planned
        if planned is None:
            return self.stage
        done = "?" if self.file_groups_done is None else self.file_groups_done
        return f"{self.stage}, {done}/{planned} file group{'' if planned == 1 else 's'}"


class Progress:
    """The stage and file group counts of one piece of work; read and written from any
    thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stage: str | None = None
        self._planned: int | None = None
        self._done: int | None = None
        self._spark: Any = None
        self._job_group: str | None = None
        self._listeners: list[Callable[[], None]] = []

    def enter(self, stage: str) -> None:
        """A new stage. The file group counts stay those of the last Spark job: what a
        commit after it writes is what those file groups made."""
        with self._lock:
            changed, self._stage = self._stage != stage, stage
        if changed:
            self._changed()
        pause_point(stage)

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

    def listen(self, listener: Callable[[], None]) -> None:
        """Call `listener` (in the work's thread) when the stage changes or a Spark job
        starts: a reporter may tell at once. Several may listen (a job's heartbeats and
        `tms run`'s lines)."""
        with self._lock:
            self._listeners.append(listener)

    def unlisten(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _changed(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def snapshot(self) -> ProgressSnapshot | None:
        """Now, as the work last said; None before the first stage."""
        with self._lock:
            if self._stage is None:
                return None
            return ProgressSnapshot(self._stage, self._done, self._planned)

    def watch_spark(self, spark: Any, job_group: str | None = None) -> None:
        """The work's Spark jobs run on `spark`, in `job_group` (None: the jobs of no group,
        an application of its own): `now` reads their finished tasks while they run."""
        with self._lock:
            self._spark, self._job_group = spark, job_group

    def now(self) -> ProgressSnapshot | None:
        """Now, with the file groups done of the Spark job still running, read from Spark's
        status tracker (the work itself hears of them only when the job ends)."""
        snapshot = self.snapshot()
        if snapshot is None:
            return None
        planned, done = snapshot.file_groups_planned, snapshot.file_groups_done
        spark = self._spark
        if planned is not None and (done or 0) < planned and spark is not None:
            running = spark_file_groups_done(spark, self._job_group, planned)
            if running is not None:
                self.tasks_done(running)
                snapshot = self.snapshot() or snapshot
        return snapshot


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


def watch_spark(spark: Any, job_group: str | None = None) -> None:
    """The work's Spark jobs run on `spark` (see `Progress.watch_spark`)."""
    progress = _CURRENT.get()
    if progress is not None:
        progress.watch_spark(spark, job_group)


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
