"""`tms run`: one table service run in this process on the job's own path (`JobRunner`).

No service tracks the run, so the attempt's side of the job API is answered here
(`LocalAttempt`): its spec is the command line's, its heartbeats go nowhere, every plan it
schedules or adopts is its own, and its result is kept for the command to print. The run
therefore chooses its executor, adopts pending plans, does direct work, heartbeats its plan,
honours a cancel requested on the table and reports as a job of the service does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tms.executor_choice import HUDI
from tms.hudi.errors import UnsupportedTableError
from tms.jobs.client import HeartbeatReply, JobSpec, Outcome
from tms.jobs.control import JobControl
from tms.jobs.runner import JobRunner, Report
from tms.services.progress import Progress
from tms.spark_runtime import get_spark
from tms.spark_runtime.hudi_bundle import UNAVAILABLE_HINT, hudi_jars, hudi_spark_conf

__all__ = ["BundleJars", "LocalAttempt", "LocalSpark", "run_here"]

log = logging.getLogger(__name__)

BundleJars = Callable[[], list[str]]
"""Obtains the jars of Hudi's Spark bundle for a run Hudi's code serves; [] when there are
none. Called only then: a run tms's own code serves needs no bundle."""


@dataclass
class LocalAttempt:
    """The job API of an attempt no service tracks, answered in this process."""

    job_spec: JobSpec
    result: Report | None = None
    """What the job reported at its end."""

    @property
    def attempt_id(self) -> int:
        return self.job_spec.attempt_id

    def spec(self) -> JobSpec:
        return self.job_spec

    def heartbeat(
        self, *, progress: dict[str, Any] | None = None, retries: int | None = None
    ) -> HeartbeatReply:
        """No lease to extend and no one to cancel it (a cancel on the table still stops
        a cancellable plan: the job checks the table itself)."""
        return HeartbeatReply(lease_expires_at=None, cancel_requested=False)

    def claim_instant(self, instant: str) -> bool:
        """No other operation tracks plans here: every one is this run's."""
        return True

    def take_table_lock(self) -> bool:
        """A `postgres` table lock is the service's PostgreSQL advisory lock: a run outside
        the service cannot take it, and must not write without it."""
        raise UnsupportedTableError(
            "the table's writers lock it with tms's PostgreSQL advisory lock (`postgres`), "
            "which only the service holds: submit the operation to the service instead"
        )

    def release_table_lock(self) -> None:
        return None

    def report_result(
        self,
        outcome: Outcome,
        *,
        error: str | None = None,
        retryable: bool = False,
        figures: dict[str, Any] | None = None,
        spark_app_id: str | None = None,
        retries: int | None = None,
    ) -> None:
        self.result = Report(outcome, error, retryable, dict(figures or {}), spark_app_id)


@dataclass(frozen=True)
class LocalSpark:
    """Starts the run's Spark in this process: the master and JVM output the command
    names, the spec's parallelism, and Hudi's bundle when the spec as decided says Hudi's
    code runs (refused, naming what to set, when there is none)."""

    master: str = "local[*]"
    jvm_output: Path | None = None
    """Where the Spark driver's JVM writes its stdout and stderr (None: this process's)."""
    bundle: BundleJars = hudi_jars

    def __call__(self, spec: JobSpec, instant: str) -> Any:
        conf = {"spark.default.parallelism": str(spec.parallelism)} if spec.parallelism else {}
        if spec.executor == HUDI:
            conf.update(hudi_spark_conf(self._bundle_or_refuse(spec)))
        return get_spark(
            self.master,
            app_name=f"tms-{spec.action}-{instant}",
            conf=conf,
            jvm_output=self.jvm_output,
        )

    def _bundle_or_refuse(self, spec: JobSpec) -> list[str]:
        jars = self.bundle()
        if jars:
            return jars
        raise UnsupportedTableError(
            f"cannot run {spec.action} on {spec.base_path} with Hudi's code: Hudi's Spark "
            f"bundle is missing; {UNAVAILABLE_HINT}"
        )


def run_here(spec: JobSpec, spark: LocalSpark, progress: Progress | None = None) -> Report:
    """Run the attempt `spec` describes in this process, as a job would; its report.
    `progress` hears the stages and file groups the job's heartbeats would carry."""
    attempt = LocalAttempt(spec)
    runner = JobRunner(
        attempt,
        spark_factory=spark,
        # the command's process ends with the run; a session it found running is not its own
        owns_spark=False,
        control=JobControl(progress=progress),
    )
    runner.run()
    if attempt.result is None:
        return Report("FAILED", error="the run ended without a result")
    return attempt.result
