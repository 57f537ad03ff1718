"""`tms worker` (run a resident Spark worker) and `tms workers ls` (the service's workers)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from tms.cli.remote import AsJson, Token, Url, connect, service_url
from tms.cli.render import echo_json, print_rows
from tms.cli.serve import load_or_exit, setup_logging
from tms.engines.hudi_bundle import bundle_source
from tms.worker import ResidentWorker, WorkerOptions

__all__ = ["worker", "workers_app"]

workers_app = typer.Typer(
    help="Resident Spark workers (talks to the service).", no_args_is_help=True
)


def worker(
    master: Annotated[
        str | None, typer.Option(help="Spark master (default: TMS_SPARK_MASTER, local[*]).")
    ] = None,
    slots: Annotated[int, typer.Option(help="Attempts run at once.", min=1, max=256)] = 2,
    queues: Annotated[
        str, typer.Option(help="Queues to take attempts from, comma-separated.")
    ] = "default",
    restart_after: Annotated[
        int | None,
        typer.Option(
            help="Restart the SparkSession after this many attempts (0 = never; default: "
            "TMS_WORKER_RESTART_AFTER_ATTEMPTS, 200).",
            min=0,
        ),
    ] = None,
    max_memory_mb: Annotated[
        int | None,
        typer.Option(
            help="Restart the SparkSession once the driver uses more memory (0 = no limit; "
            "default: TMS_WORKER_MAX_MEMORY_MB, 0).",
            min=0,
        ),
    ] = None,
    log_dir: Annotated[
        Path | None, typer.Option(help="Attempt logs (default: TMS_LOG_DIR/worker).")
    ] = None,
    url: Url = None,
    token: Token = None,
    log_level: Annotated[str, typer.Option(help="debug | info | warning | error.")] = "info",
    parent_pid: Annotated[
        int | None,
        typer.Option(hidden=True, help="Stop when this process is gone (tms serve's workers)."),
    ] = None,
) -> None:
    """Run a resident Spark worker: one long-running Spark application that claims attempts
    from the service (an admin token when auth is on) and runs them on its SparkSession,
    until SIGTERM or Ctrl-C (running attempts finish first)."""
    settings = load_or_exit()
    setup_logging(log_level)
    options = WorkerOptions(
        api_url=service_url(url),
        token=token,
        master=master or settings.spark_master,
        slots=slots,
        queues=tuple(q.strip() for q in queues.split(",") if q.strip()) or ("default",),
        log_dir=log_dir or settings.job_log_dir / "worker",
        poll_seconds=settings.worker_poll_seconds,
        restart_after_attempts=(
            settings.worker_restart_after_attempts if restart_after is None else restart_after
        ),
        max_memory_mb=settings.worker_max_memory_mb if max_memory_mb is None else max_memory_mb,
        parent_pid=parent_pid,
        hudi_jars=settings.hudi_jars,
        hudi_source=bundle_source(settings),
        task_memory=settings.task_memory,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    ResidentWorker(options).run(stop)


@workers_app.command("ls")
def workers_ls(as_json: AsJson = False, url: Url = None, token: Token = None) -> None:
    """List the workers registered with the service: slots, busy, attempts run, alive."""
    with connect(url, token) as client:
        workers = client.workers()
    if as_json:
        echo_json(workers)
        return
    if not workers:
        typer.echo("no workers")
        return
    rows = [
        {
            "id": w["id"],
            "host": w["host"],
            "master": w["spark_master"],
            "queues": ",".join(w["queues"]),
            "slots": w["slots"],
            "busy": w["busy"],
            "runs": w["attempts_run"],
            "state": "alive" if w["alive"] else "silent",
            "last_seen": w["last_seen_at"],
        }
        for w in workers
    ]
    print_rows(
        rows,
        ["id", "host", "master", "queues", "slots", "busy", "runs", "state", "last_seen"],
    )
