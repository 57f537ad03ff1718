"""The resident workers `tms serve` starts itself (`TMS_WORKERS` > 0): `tms worker`
processes next to the service, each one Spark application, stopped with the service.

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
import time
from pathlib import Path

from tms.config import Role, Settings

__all__ = ["WorkerProcesses"]

log = logging.getLogger(__name__)


class WorkerProcesses:
    def __init__(self, settings: Settings, *, stop_grace_seconds: float = 30.0) -> None:
        self.settings = settings
        self.stop_grace_seconds = stop_grace_seconds
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        settings = self.settings
        env = dict(os.environ)
        admin = next((t for t in settings.auth_tokens if t.role is Role.ADMIN), None)
        if admin is not None:
            env["TMS_TOKEN"] = admin.token.get_secret_value()
        log_dir = settings.job_log_dir / "worker"
        log_dir.mkdir(parents=True, exist_ok=True)
        for number in range(settings.workers):
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
            self.processes.append(process)
            log.info(
                "resident worker %d started (pid %d, %d slot(s), log %s)",
                number,
                process.pid,
                settings.worker_slots,
                out,
            )

    def log_file(self, number: int) -> Path:
        """Where worker `number` writes its own output (its SparkSession's start among it)."""
        return self.settings.job_log_dir / "worker" / f"worker-{number}.log"

    def exit_codes(self) -> list[int]:
        """The exit codes of the started workers that have ended (one that cannot start its
        SparkSession ends before it registers)."""
        codes = [process.poll() for process in self.processes]
        return [code for code in codes if code is not None]

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace_seconds
        for process in self.processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("resident worker pid %d did not stop in time: killed", process.pid)
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
