"""The resident workers `tms serve` starts itself (`TMS_WORKERS` > 0): `tms worker`
processes next to the service, each one Spark application, started again when one ends
while the service runs (with a delay that doubles while it keeps ending soon after its
start), stopped with the service.

A worker is an ordinary client of the API: it registers and claims over HTTP, with the
first admin token when auth is on. Stopping asks each to stop (SIGTERM: it claims nothing
more and lets its attempts finish) and kills it after the grace period; an attempt killed
that way loses its lease and is retried, as after any crash. A worker whose service died
without stopping it (killed) notices that its parent is gone and stops too.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tms.config import Role, Settings

__all__ = ["WorkerProcesses"]

log = logging.getLogger(__name__)


RESTART_DELAY_SECONDS = 1.0
"""The first wait before a worker that ended is started again; it doubles while the worker
keeps ending soon after its start, up to `RESTART_DELAY_MAX_SECONDS`."""
RESTART_DELAY_MAX_SECONDS = 60.0
WATCH_INTERVAL_SECONDS = 1.0


class WorkerProcesses:
    """The resident workers of this service: started with it, started again when one ends
    while the service runs (killed by the OOM killer, say: its attempts lose their leases and
    are retried, and need a worker to run on), stopped with it."""

    def __init__(self, settings: Settings, *, stop_grace_seconds: float = 30.0) -> None:
        self.settings = settings
        self.stop_grace_seconds = stop_grace_seconds
        self.processes: list[subprocess.Popen[bytes]] = []
        self._ended: list[int] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self._delays: list[float] = []
        self._due: list[float] = []
        self._started_at: list[float] = []

    def start(self) -> None:
        for number in range(self.settings.workers):
            self.processes.append(self._spawn(number))
            self._delays.append(RESTART_DELAY_SECONDS)
            self._due.append(0.0)
            self._started_at.append(time.monotonic())
        self._watcher = threading.Thread(target=self._watch, name="tms-workers", daemon=True)
        self._watcher.start()

    def _spawn(self, number: int) -> subprocess.Popen[bytes]:
        settings = self.settings
        env = dict(os.environ)
        admin = next((t for t in settings.auth_tokens if t.role is Role.ADMIN), None)
        if admin is not None:
            env["TMS_TOKEN"] = admin.token.get_secret_value()
        log_dir = settings.job_log_dir / "worker"
        log_dir.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "tms",
            "worker",
            "--url",
            settings.api_url,
            "--slots",
            str(settings.worker_slots),
            "--master",
            settings.spark_master,
            "--log-dir",
            str(log_dir),
            "--restart-after",
            str(settings.worker_restart_after_attempts),
            "--max-memory-mb",
            str(settings.worker_max_memory_mb),
            "--parent-pid",
            str(os.getpid()),
        ]
        out = self.log_file(number)
        with out.open("ab") as sink:
            process = subprocess.Popen(
                command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
            )
        log.info(
            "resident worker %d started (pid %d, %d slot(s), log %s)",
            number,
            process.pid,
            settings.worker_slots,
            out,
        )
        return process

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_INTERVAL_SECONDS):
            self.revive()

    def revive(self) -> list[int]:
        """Start again each worker that ended while the service runs, once its delay is
        over; the numbers of those started."""
        started = []
        with self._lock:
            for number, process in enumerate(self.processes):
                code = process.poll()
                if code is None or self._stopping.is_set():
                    continue
                now = time.monotonic()
                if self._due[number] == 0.0:  # just seen ended
                    self._ended.append(code)
                    if now - self._started_at[number] > RESTART_DELAY_MAX_SECONDS:
                        self._delays[number] = RESTART_DELAY_SECONDS  # it ran a while
                    self._due[number] = now + self._delays[number]
                    log.warning(
                        "resident worker %d (pid %d) ended with %s: starting it again in %gs",
                        number,
                        process.pid,
                        code,
                        self._delays[number],
                    )
                    continue
                if now < self._due[number]:
                    continue
                self.processes[number] = self._spawn(number)
                self._started_at[number], self._due[number] = now, 0.0
                self._delays[number] = min(2 * self._delays[number], RESTART_DELAY_MAX_SECONDS)
                started.append(number)
        return started

    def log_file(self, number: int) -> Path:
        """Where worker `number` writes its own output (its SparkSession's start among it)."""
        return self.settings.job_log_dir / "worker" / f"worker-{number}.log"

    def exit_codes(self) -> list[int]:
        """The exit codes of the started workers that have ended, those started again
        since included (one that cannot start its SparkSession ends before it registers)."""
        with self._lock:
            codes = [process.poll() for process in self.processes]
            return [*self._ended, *(c for c in codes if c is not None)]

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join()
        with self._lock:
            processes = list(self.processes)
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_seconds
        for process in processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("resident worker pid %d did not stop in time: killed", process.pid)
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
