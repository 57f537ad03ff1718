"""Waiting for the resident Spark worker the demo's service starts, before the first commit.

Until a worker serves the table's queue, the scheduler runs the table's operations through
spark-submit; a worker registers only once its SparkSession has started. So the demo
writes only once `GET /v1/workers` lists a live worker for the queue, and says how long
that took; if the worker ends first, or does not register in time, it says that the table
services run through spark-submit instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tms.api_client import ApiClient

__all__ = ["ResidentWorker", "WorkerWait", "await_worker", "wait_for_worker"]

Echo = Callable[[str], None]


@dataclass(frozen=True)
class ResidentWorker:
    """The worker the demo's service started: whether it ended, and its own log."""

    exit_codes: Callable[[], list[int]]
    """The exit codes of the started workers that ended."""
    log_file: Path


@dataclass(frozen=True)
class WorkerWait:
    worker_id: str | None
    """The live worker serving the queue; None when none came."""
    seconds: float
    ended: int | None = None
    """The exit code of a worker that ended before it registered."""


def await_worker(
    client: ApiClient,
    worker: ResidentWorker,
    queue: str,
    timeout: float,
    poll: float,
    echo: Echo,
) -> bool:
    """Hold the demo until the resident worker serves `queue`, saying so; False (and what
    runs the table services instead) when it ended or did not start within `timeout`."""
    echo("  waiting for the resident Spark worker to start (its SparkSession)...")
    wait = wait_for_worker(client, queue, timeout=timeout, poll=poll, exit_codes=worker.exit_codes)
    if wait.worker_id is not None:
        echo(
            f"  the resident Spark worker is ready after {wait.seconds:.1f}s: "
            "it runs the table services"
        )
        return True
    what = (
        f"ended (exit code {wait.ended})"
        if wait.ended is not None
        else f"did not start within {timeout:.0f}s"
    )
    echo(
        f"  the resident Spark worker {what}; its log: {worker.log_file}. "
        "The table services run through spark-submit"
    )
    return False


def wait_for_worker(
    client: ApiClient,
    queue: str,
    *,
    timeout: float,
    poll: float,
    exit_codes: Callable[[], list[int]] = list,
) -> WorkerWait:
    """Until a live worker serves `queue`, a started worker ended (`exit_codes`), or
    `timeout` seconds passed."""
    started = time.monotonic()
    while True:
        for worker in client.workers():
            if worker.get("alive") and queue in (worker.get("queues") or []):
                return WorkerWait(str(worker["id"]), time.monotonic() - started)
        codes = exit_codes()
        if codes:
            return WorkerWait(None, time.monotonic() - started, ended=codes[0])
        if time.monotonic() - started >= timeout:
            return WorkerWait(None, time.monotonic() - started)
        time.sleep(poll)
