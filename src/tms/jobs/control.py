"""Stop requests between the job's threads: the heartbeat thread learns of a cancel request
or a lost lease; the work thread, possibly deep inside a Spark action, must stop.

A service may enter a stage a cancel must no longer interrupt (an index build's catch-up:
writers already log to the new partitions). The work thread then `hold()`s the control: a
cancel request that comes later is only recorded (`cancel_too_late`), and the work finishes.
A lost lease still stops it: the attempt is no longer ours."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tms.jobs.client import AttemptApi, AttemptGone, JobApiError
from tms.jobs.context import attempt_thread
from tms.services.progress import Progress

__all__ = ["Heartbeater", "JobControl", "JobStopped"]

log = logging.getLogger(__name__)


class JobStopped(Exception):
    """Raised in the work thread at a check point once a stop was requested."""


class JobControl:
    """Cancel and lease-lost flags, and the Spark session whose jobs a stop cancels."""

    def __init__(self, job_group: str | None = None, progress: Progress | None = None) -> None:
        self.job_group = job_group
        """Spark's job group of this attempt's work where a SparkContext is shared (a
        resident worker): a stop cancels that group, never the other attempts' jobs."""
        self._lock = threading.Lock()
        self.cancelled = threading.Event()
        """A cancel request that stops the work."""
        self.cancel_too_late = threading.Event()
        """A cancel request that came while held: recorded, the work goes on."""
        self.lost = threading.Event()
        self.cancel_reason = "cancelled by request"
        self._held: str | None = None
        self._spark: Any = None
        self.progress = progress or Progress()
        """Where the work says how far it got (`tms.services.progress`), for the beats."""
        self._table_check: Callable[[], str | None] | None = None

    @property
    def stopping(self) -> bool:
        return self.cancelled.is_set() or self.lost.is_set()

    @property
    def spark(self) -> Any:
        return self._spark

    def check(self) -> None:
        if self.stopping:
            raise JobStopped("lease lost" if self.lost.is_set() else "cancel requested")

    def attach_spark(self, spark: Any) -> None:
        """Make `spark` cancellable; a stop that came while it started takes effect now."""
        with self._lock:
            self._spark = spark
        self.progress.watch_spark(spark, self.job_group)
        self.check()

    @property
    def cancel_requested(self) -> bool:
        """Whether a cancel request came, in time or too late."""
        return self.cancelled.is_set() or self.cancel_too_late.is_set()

    @property
    def held(self) -> str | None:
        """Why a cancel no longer stops the work (the stage), or None."""
        return self._held

    def hold(self, reason: str) -> None:
        """From now on a cancel request does not stop the work. A cancel (or a lost lease)
        that came before wins: `JobStopped`, so the work stops where it still may. Holding
        again changes nothing (the first reason stays)."""
        with self._lock:
            if self._held is not None:
                return
            self.check()
            self._held = reason
            log.info("cancel requests no longer stop the work: %s", reason)

    def watch_table(self, check: Callable[[], str | None]) -> None:
        """From now on each heartbeat also asks `check` whether the table itself carries a
        cancel request for the plan (RFC-79, written by any writer): its reason, or None."""
        self._table_check = check

    def progress_now(self) -> dict[str, Any] | None:
        """The work's progress for a heartbeat: the stage it entered, and its file groups,
        those done read from Spark's status tracker while its Spark job runs."""
        snapshot = self.progress.now()
        return None if snapshot is None else snapshot.to_dict()

    def table_cancel_reason(self) -> str | None:
        check = self._table_check
        if check is None or self.cancel_requested:
            return None
        try:
            return check()
        except Exception as exc:  # storage trouble: the next beat asks again
            log.warning("could not check the table for a cancel request: %r", exc)
            return None

    def request_cancel(self, reason: str | None = None) -> None:
        with self._lock:
            if self.cancel_requested:
                return
            if reason is not None:
                self.cancel_reason = reason
            if self._held is not None:
                self.cancel_too_late.set()
                log.warning("cancel requested too late (%s): the work finishes", self._held)
                return
            log.warning("%s: stopping the work", self.cancel_reason)
            self.cancelled.set()
            self._cancel_spark_jobs()

    def lose(self) -> None:
        with self._lock:
            first = not self.lost.is_set()
            self.lost.set()
            if first:
                self._cancel_spark_jobs()

    def cancel_spark_jobs(self) -> None:
        """Cancel the work's running Spark jobs again (after `request_cancel`), for work that
        starts more of them after the first cancel."""
        with self._lock:
            if self.cancelled.is_set():
                self._cancel_spark_jobs()

    def _cancel_spark_jobs(self) -> None:
        if self._spark is None:
            return
        try:
            if self.job_group is not None:
                self._spark.sparkContext.cancelJobGroup(self.job_group)
            else:
                self._spark.sparkContext.cancelAllJobs()
        except Exception as exc:  # the context may be stopping; the stop still stands
            log.warning("could not cancel Spark jobs: %r", exc)


class Heartbeater:
    """Beats at once, then every `interval` seconds, each beat with the work's progress. A
    401/404/409 means the lease is lost (stop at once); a reply with `cancel_requested`, or
    a cancel request on the table for a cancellable plan (`JobControl.watch_table`), cancels
    the work. Transient errors are only logged: the lease outlives a few missed beats. But
    once no beat was answered for `lease_seconds` (counted from the sending of the last one
    answered, which the service received later), the lease may have run out and another
    attempt may be running the operation: the job stops as for a lost lease (a service that
    died, or a network cut, leaves no one to tell it). A
    new stage or Spark job beats at once, without waiting for the interval; when stopped,
    it beats once more if the progress changed since the last beat, so the attempt keeps
    where the work ended."""

    def __init__(
        self,
        client: AttemptApi,
        interval: float,
        control: JobControl,
        lease_seconds: float | None = None,
    ) -> None:
        self._client = client
        self._interval = interval
        self._control = control
        self._lease_seconds = lease_seconds
        self._answered = time.monotonic()
        """When the last beat answered was sent (at first: when the spec was fetched)."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        """Set by a stop, a new stage of the work and the start of its Spark job."""
        self._sent: dict[str, Any] | None = None
        control.progress.listen(self._wake.set)
        self._thread = attempt_thread(self._run, "tms-job-heartbeat")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._control.progress.unlisten(self._wake.set)
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._interval + 5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # a stage entered from now on beats again
            if self._lease_ran_out():
                log.error(
                    "no heartbeat answered for %.0fs: the lease (%gs) may have run out, stopping",
                    time.monotonic() - self._answered,
                    self._lease_seconds,
                )
                self._control.lose()
                return
            progress = self._control.progress_now()
            sending = time.monotonic()
            try:
                reply = self._client.heartbeat(progress=progress, retries=2)
            except AttemptGone as exc:
                log.error("lease lost, stopping: %s", exc)
                self._control.lose()
                return
            except JobApiError as exc:
                log.warning("heartbeat failed (the lease may still hold): %s", exc)
            else:
                self._answered = sending
                self._sent = progress
                if reply.cancel_requested and not self._control.cancel_requested:
                    self._control.request_cancel("cancelled by request")
            reason = self._control.table_cancel_reason()
            if reason is not None:
                self._control.request_cancel(reason)
            self._wake.wait(self._wait())
            if self._stop.is_set():
                self._last_beat()
                return

    def _lease_ran_out(self) -> bool:
        return (
            self._lease_seconds is not None
            and time.monotonic() - self._answered >= self._lease_seconds
        )

    def _wait(self) -> float:
        """Until the next beat: the interval, or less when the lease runs out sooner."""
        if self._lease_seconds is None:
            return self._interval
        left = self._answered + self._lease_seconds - time.monotonic()
        return max(0.0, min(self._interval, left))

    def _last_beat(self) -> None:
        """The progress the work ended with, when the last beat did not carry it."""
        progress = self._control.progress_now()
        if self._control.lost.is_set() or progress is None or progress == self._sent:
            return
        try:
            self._client.heartbeat(progress=progress, retries=0)
        except JobApiError as exc:  # the result follows anyway
            log.info("last heartbeat (progress) failed: %s", exc)
