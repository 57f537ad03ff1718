"""The resident worker's loop: claim attempts over HTTP (a long poll), run each on the
shared SparkSession in a thread of its own, restart the session when it has run enough.

Each attempt runs exactly as a spark-submit job does (`tms.jobs.JobRunner`: its spec,
heartbeats, cancel checks, result over the job API), with three differences a shared
application needs: its Spark jobs run in a job group of their own (a cancel cancels that
group only) and in a FAIR scheduler pool per slot; the session is not stopped when the
attempt ends; and its log file takes its own threads' lines only. An attempt that fails,
or whose work had to be abandoned, never takes the worker down: an abandoned attempt makes
the worker restart its session once the others have finished.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tms.jobs.client import JobClient, JobSpec
from tms.jobs.context import ATTEMPT, AttemptLogFilter
from tms.jobs.control import JobControl
from tms.jobs.runner import JobRunner
from tms.spark_runtime import get_spark
from tms.spark_runtime.hudi_bundle import BundleSource, fetcher, hudi_spark_conf
from tms.spark_runtime.package import package_zip
from tms.spark_runtime.task_memory import task_memory_conf
from tms.worker.client import ClaimedAttempt, WorkerApiError, WorkerClient

__all__ = ["ResidentWorker", "WorkerOptions"]

log = logging.getLogger(__name__)

PARENT_GRACE_SECONDS = 30.0
SessionFactory = Callable[[str, int], Any]
"""(master, slots) → a SparkSession for the worker."""


@dataclass(frozen=True)
class WorkerOptions:
    api_url: str
    token: str | None = None
    master: str = "local[*]"
    slots: int = 2
    queues: tuple[str, ...] = ("default",)
    log_dir: Path = Path("logs")
    poll_seconds: float = 20.0
    restart_after_attempts: int = 200
    """Restart the SparkSession after this many attempts (0 = never)."""
    max_memory_mb: int = 0
    """Restart the SparkSession once the driver's memory (Python and JVM) passes this (0 =
    no limit)."""
    parent_pid: int | None = None
    """Stop when this process (the `tms serve` that started the worker) is gone."""
    hudi_jars: str | None = None
    """`TMS_HUDI_JARS`: Hudi's Spark bundle for the `hudi` executor; unset, the bundle in
    `hudi_source`'s cache, fetched there before the SparkSession starts when missing."""
    hudi_source: BundleSource = field(default_factory=BundleSource)
    task_memory: str | None = None
    """`TMS_TASK_MEMORY`: the memory budget of each native task (`spark.tms.task.memory`)."""
    worker_id: str = field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    )


def worker_session(
    master: str, slots: int, hudi_jars: tuple[str, ...] = (), task_memory: str | None = None
) -> Any:
    """The worker's SparkSession: FAIR scheduling between its slots' pools, with Hudi's
    bundle for the `hudi` executor when there is one."""
    conf = {
        "spark.scheduler.mode": "FAIR",
        **task_memory_conf(task_memory),
        **hudi_spark_conf(list(hudi_jars)),
    }
    session = get_spark(master, app_name=f"tms-worker-{slots}-slots", conf=conf)
    if not master.startswith("local"):  # executors elsewhere import the task code from it
        zip_path = package_zip(Path(tempfile.gettempdir()) / "tms-worker")
        session.sparkContext.addPyFile(str(zip_path))
    return session


class ResidentWorker:
    def __init__(
        self,
        options: WorkerOptions,
        *,
        session_factory: SessionFactory | None = None,
        client: WorkerClient | None = None,
    ) -> None:
        self.options = options
        self._session_factory = session_factory or self._start_session
        self._client = client or WorkerClient(options.api_url, options.worker_id, options.token)
        self._lock = threading.Condition()
        self._running: dict[int, int] = {}
        """Slot by attempt id."""
        self._spark: Any = None
        self._runs_since_restart = 0
        self._restart_wanted = False
        self.attempts_finished = 0

    def _start_session(self, master: str, slots: int) -> Any:
        """A SparkSession with Hudi's bundle for attempts that run Hudi's code: fetched first
        (once, into the cache the service shares) when it is missing; without it when it
        cannot be had, so tms's own executor still serves."""
        options = self.options
        bundle = fetcher(options.hudi_source)
        jars = bundle.jars(options.hudi_jars, wait=None)
        if not jars:
            log.warning(
                "the hudi executor is unavailable on this worker: %s",
                bundle.status(options.hudi_jars).detail,
            )
        return worker_session(master, slots, tuple(jars), options.task_memory)

    @property
    def worker_id(self) -> str:
        return self.options.worker_id

    def run(self, stop: threading.Event) -> None:
        """Claim and run attempts until `stop` is set; then let the running ones finish."""
        tms_log = logging.getLogger("tms")  # attempt logs take what a job logs: INFO up
        if tms_log.getEffectiveLevel() > logging.INFO:
            tms_log.setLevel(logging.INFO)
        if self.options.parent_pid is not None:
            threading.Thread(
                target=self._watch_parent, args=(stop,), name="tms-worker-parent", daemon=True
            ).start()
        self._spark = self._session_factory(self.options.master, self.options.slots)
        if not self._register_until_accepted(stop):
            return
        log.info(
            "worker %s: %d slot(s) for queue(s) %s on Spark %s",
            self.worker_id,
            self.options.slots,
            ",".join(self.options.queues),
            self.options.master,
        )
        try:
            while not stop.is_set():
                free = self._wait_for_a_free_slot(stop)
                if stop.is_set():
                    break
                self._restart_if_due()
                try:
                    claims = self._client.claim(
                        free=free,
                        busy=len(self._running),
                        wait_seconds=self.options.poll_seconds,
                        log_dir=str(self.options.log_dir),
                    )
                except WorkerApiError as exc:
                    if exc.status == 404:  # forgotten (removed, or the database reset)
                        if not self._register_until_accepted(stop):
                            break
                        continue
                    log.warning("claim failed: %s; trying again", exc)
                    stop.wait(2.0)
                    continue
                for claim in claims:
                    self._start(claim)
        finally:
            self._wait_for_running()
            self._client.leave()
            self._client.close()

    def _watch_parent(self, stop: threading.Event) -> None:
        """A worker `tms serve` started ends with it: once that process is gone (even
        killed), stop claiming, and leave the running attempts `PARENT_GRACE_SECONDS` to
        end before exiting (their leases, kept by nobody, expire and they are retried)."""
        while not stop.wait(1.0):
            if os.getppid() != self.options.parent_pid:
                log.warning("the service that started this worker is gone: stopping")
                stop.set()
                if not self._wait_for_running(PARENT_GRACE_SECONDS):
                    log.warning("attempts still running after %ss: exiting", PARENT_GRACE_SECONDS)
                    os._exit(1)
                return

    def _register_until_accepted(self, stop: threading.Event) -> bool:
        """Register, retrying while the service does not answer (it may be starting);
        False when stopped first. A refusal (a bad token) is raised."""
        delay = 0.5
        while not stop.is_set():
            try:
                self._register()
                return True
            except WorkerApiError as exc:
                if exc.status is not None and exc.status < 500:
                    raise
                log.info("the service does not answer yet (%s); retrying", exc)
            stop.wait(delay)
            delay = min(delay * 2, 10.0)
        return False

    def _register(self) -> None:
        self._client.register(
            host=socket.gethostname(),
            pid=os.getpid(),
            spark_master=self.options.master,
            queues=list(self.options.queues),
            slots=self.options.slots,
        )

    def _wait_for_a_free_slot(self, stop: threading.Event) -> int:
        with self._lock:
            while len(self._running) >= self.options.slots and not stop.is_set():
                self._lock.wait(0.5)
            return self.options.slots - len(self._running)

    def _wait_for_running(self, timeout: float | None = None) -> bool:
        """Wait for the running attempts to end; False when `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._running:
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                self._lock.wait(0.5)
        return True

    def _start(self, claim: ClaimedAttempt) -> None:
        with self._lock:
            used = set(self._running.values())
            slot = min(set(range(self.options.slots)) - used)
            self._running[claim.attempt_id] = slot
        thread = threading.Thread(
            target=self._run_attempt,
            args=(claim, slot),
            name=f"tms-worker-attempt-{claim.attempt_id}",
            daemon=True,
        )
        thread.start()

    def _run_attempt(self, claim: ClaimedAttempt, slot: int) -> None:
        ATTEMPT.set(claim.attempt_id)
        handler = self._attempt_log(claim)
        group = f"tms-attempt-{claim.attempt_id}"
        abandoned = False
        try:
            with JobClient(self._client.api_url, claim.attempt_id, claim.token) as client:
                runner = JobRunner(
                    client,
                    spark_factory=lambda spec, instant: self._attempt_spark(spec, group, slot),
                    owns_spark=False,
                    control=JobControl(job_group=group),
                )
                code = runner.run()
                abandoned = runner.abandoned_work
            log.info("attempt %s ended (exit code %s)", claim.attempt_id, code)
        except Exception:  # the worker outlives any attempt
            log.exception("attempt %s failed in the worker", claim.attempt_id)
        finally:
            if handler is not None:
                logging.getLogger().removeHandler(handler)
                handler.close()
            with self._lock:
                self._running.pop(claim.attempt_id, None)
                self._runs_since_restart += 1
                self.attempts_finished += 1
                if abandoned:
                    self._restart_wanted = True
                self._lock.notify_all()

    def _attempt_spark(self, spec: JobSpec, group: str, slot: int) -> Any:
        """The shared session, with this thread's Spark jobs in the attempt's job group
        and its slot's FAIR pool (PySpark keeps both per Python thread)."""
        if spec.storage_options:
            raise RuntimeError(
                "a table with storage options of its own cannot run in a resident worker "
                "(its options reach Spark tasks through the application's environment)"
            )
        context = self._spark.sparkContext
        context.setJobGroup(group, f"tms attempt {spec.attempt_id}", interruptOnCancel=True)
        context.setLocalProperty("spark.scheduler.pool", f"slot-{slot}")
        return self._spark

    def _attempt_log(self, claim: ClaimedAttempt) -> logging.Handler | None:
        path = self.options.log_dir / str(claim.operation_id) / f"{claim.attempt_id}.log"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(path, encoding="utf-8")
        except OSError as exc:
            log.warning("attempt %s: no log file at %s: %r", claim.attempt_id, path, exc)
            return None
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s tms-job %(name)s: %(message)s")
        )
        handler.addFilter(AttemptLogFilter(claim.attempt_id))
        logging.getLogger().addHandler(handler)
        return handler

    def _restart_if_due(self) -> None:
        """A new SparkSession, between attempts, when enough ran on this one, its memory
        passed the limit, or an attempt's work was abandoned in it."""
        with self._lock:
            if self._running:
                return
            reason = self._restart_reason()
            if reason is None:
                return
            self._runs_since_restart = 0
            self._restart_wanted = False
        log.warning("restarting the SparkSession: %s", reason)
        try:
            self._spark.stop()
        except Exception as exc:
            log.warning("stopping the SparkSession failed: %r", exc)
        self._spark = self._session_factory(self.options.master, self.options.slots)

    def _restart_reason(self) -> str | None:
        if self._restart_wanted:
            return "an attempt's work was abandoned in it"
        after = self.options.restart_after_attempts
        if after > 0 and self._runs_since_restart >= after:
            return f"{self._runs_since_restart} attempts ran on it"
        limit = self.options.max_memory_mb
        if limit > 0:
            used = driver_memory_mb(self._spark)
            if used > limit:
                return f"the driver uses {used} MB, over {limit} MB"
        return None


def driver_memory_mb(spark: Any) -> int:
    """Resident memory of this process and of the driver JVM it started (local masters run
    the executors in it), in MB."""
    pids = {os.getpid()}
    with contextlib.suppress(Exception):  # no JVM to ask (a stopped session)
        pids.add(int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()))
    return sum(_rss_kb(pid) for pid in pids) // 1024


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0
