"""From a claimed attempt to a launched job: the launch request, and the record of the jobs
this instance runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tms.application import ClaimedJob
from tms.engines.base import JobHandle, LaunchSpec

__all__ = ["RunningJob", "exit_error", "launch_spec", "log_path_for"]


@dataclass
class RunningJob:
    """A job this instance launched and still watches."""

    operation_id: int
    attempt_id: int
    action: str
    handle: JobHandle
    # Monotonic time since when the job should stop (cancel requested, or its attempt no
    # longer current); it is killed once that lasted longer than the grace period.
    stop_since: float | None = None
    stop_reason: str | None = None
    killed: bool = False


def log_path_for(log_dir: Path, operation_id: int, attempt_id: int) -> Path:
    return log_dir / str(operation_id) / f"{attempt_id}.log"


def launch_spec(job: ClaimedJob, *, api_url: str, log_dir: Path) -> LaunchSpec:
    return LaunchSpec(
        operation_id=job.operation_id,
        attempt_id=job.attempt_id,
        action=job.action,
        api_url=api_url,
        token=job.token,
        log_path=log_path_for(log_dir, job.operation_id, job.attempt_id),
        queue=job.queue,
        resource=job.resource,
        parallelism=job.parallelism,
        extra_params=job.extra_params,
        executor=job.executor,
    )


def exit_error(code: int, *, killed_because: str | None, log_path: Path, tail: str) -> str:
    """The attempt's error text when its process ended without reporting a result."""
    if code < 0:
        what = f"job process killed by signal {-code}"
    else:
        what = f"job process exited with code {code}"
    text = f"{what} without reporting a result"
    if killed_because:
        text += f" (killed by the scheduler: {killed_because})"
    if tail:
        text += f"\n--- last lines of {log_path} ---\n{tail}"
    return text
