"""`tms demo`: the whole service on one machine, as a Hudi writer would meet it.

It starts the service in this process (embedded PostgreSQL, a free port), writes a
merge-on-read table with the project's writer and, after every commit, posts Hudi's HTTP
commit callback exactly as a Hudi writer does. The service's policies turn those commits
into compactions and, after the last commit, a clean: the table is registered first with a
policy that says when and how (compact every few delta commits; clean once the demo's
commits are in, keeping the latest file version of each file group). They run as real
Spark jobs: by default in the resident Spark worker the service starts, which the demo
waits for before its first commit (`tms.demo.worker_ready`), else through spark-submit.
Every table service is checked with the independent reader (`hudi`, hudi-rs): the snapshot
before it must equal the snapshot after it.

The writer waits for the table services its commit triggered before it writes again, so
each oracle check compares one quiescent table state with the next. While a job runs, the
demo prints its progress as its heartbeats report it (stage, file groups done out of
planned) and its log file. The web console's address is printed at the start and the end;
with `keep_running` the service stays up after the report until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tms.api_client import ApiClient
from tms.config import DEFAULT_CALLBACK_KEY, Settings, load_settings
from tms.demo.checks import check_options, clear_data_dir
from tms.demo.keep import console_url, wait_for_stop
from tms.demo.logs import demo_logging
from tms.demo.options import DemoOptions
from tms.demo.s3 import BUCKET, local_s3
from tms.demo.table import DemoWriter, callback_payload, data_files, file_groups
from tms.demo.watch import Echo, OperationSummary, Watcher
from tms.demo.worker_ready import ResidentWorker, await_worker
from tms.serve import free_port, serve_in_thread
from tms.verify import oracle_snapshot

__all__ = ["LOG_FILE", "DemoOptions", "DemoReport", "demo_policy", "run_demo"]

LOG_FILE = "demo.log"
"""In the demo's data dir: what the libraries it runs log, kept out of its output."""


def demo_policy(options: DemoOptions) -> dict[str, object]:
    """The table's policy: compaction every few delta commits; one clean when the demo's
    commits are all in, keeping the latest file slice of each file group."""
    return {
        "compaction_delta_commits": options.commits_per_compaction,
        "clean_commits": options.rounds * options.commits_per_compaction,
        "clean_policy": "KEEP_LATEST_FILE_VERSIONS",
        "clean_retained": 1,
    }


@dataclass
class DemoReport:
    base_path: str
    service_url: str = ""
    console_url: str = ""
    commits: list[str] = field(default_factory=list)
    operations: list[OperationSummary] = field(default_factory=list)
    files_before: int = 0
    files_after: int = 0
    slices_before: int = 0
    slices_after: int = 0
    oracle_rows: int = 0
    oracle_checks: int = 0
    oracle_mismatches: list[str] = field(default_factory=list)
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            not self.timed_out
            and not self.oracle_mismatches
            and self.oracle_checks > 0
            and all(op.status == "COMPLETED" for op in self.operations)
        )


def _settings(options: DemoOptions, data_dir: Path, port: int) -> Settings:
    """The embedded defaults, quicker to react; the table's own policy says what to run."""
    return load_settings(
        config_file=False,
        environ={},
        data_dir=data_dir,
        port=port,
        spark_master=options.master,
        max_running_per_instance=1,
        workers=1 if options.engine == "spark-worker" else 0,
        worker_slots=1,
        scheduler_interval_seconds=0.5,
        heartbeat_interval_seconds=2.0,  # each beat carries the job's progress
        retry_base_seconds=2.0,
        # The demo notifies every commit and checks the table around each operation its
        # callbacks create: a pull must not create them first.
        pull_listings_per_minute=0,
    )


class _Oracle:
    """Snapshots through hudi-rs; each table service must leave the snapshot unchanged."""

    def __init__(
        self, base_path: str, report: DemoReport, options: dict[str, str] | None = None
    ) -> None:
        self.base_path = base_path
        self.report = report
        self.options = options
        self.before: pa.Table | None = None

    def take_before(self) -> None:
        self.before = oracle_snapshot(self.base_path, self.options)

    def check(self, what: str) -> bool:
        assert self.before is not None
        after = oracle_snapshot(self.base_path, self.options)
        self.report.oracle_checks += 1
        self.report.oracle_rows = after.num_rows
        same = bool(self.before.equals(after))
        if not same:
            self.report.oracle_mismatches.append(what)
        self.before = after
        return same


def run_demo(
    options: DemoOptions,
    echo: Echo,
    *,
    on_report: Callable[[DemoReport], None] | None = None,
    stop: threading.Event | None = None,
) -> DemoReport:
    """Run the whole demo; the report says what happened (`report.ok`). `on_report` hears
    it while the service still runs; with `options.keep_running` the service then stays up
    until Ctrl-C, SIGTERM or `stop`. Options it cannot run with raise `DemoRefused` before
    anything starts or is deleted."""
    check_options(options)
    started = time.monotonic()
    data_dir = options.data_dir.expanduser().absolute()
    clear_data_dir(data_dir)  # the demo's own service state, afresh
    log_file = data_dir / LOG_FILE
    with ExitStack() as stack:
        stack.enter_context(demo_logging(log_file))
        echo(f"Logs of the libraries the demo runs go to {log_file}")
        s3 = stack.enter_context(local_s3()) if options.storage == "s3" else None
        table = _DemoTable(str(options.base_path.expanduser().absolute()))
        if s3 is not None:
            stack.enter_context(_environment(s3.environment))
            table = _DemoTable(s3.base_path("trips"), s3.storage_options, s3.hudi_rs_options)
            echo(
                f"Started a local S3 server at {s3.url} (moto), bucket {BUCKET}; "
                f"its access log goes to {LOG_FILE}"
            )
        report = DemoReport(table.base_path)
        settings = _settings(options, data_dir, free_port())
        echo(f"Starting tms with an embedded PostgreSQL under {data_dir}")
        service = serve_in_thread(settings)
        report.service_url = service.url
        report.console_url = console_url(service.url)
        try:
            with ApiClient(service.url) as client:
                echo(
                    f"  serving at {service.url}; compaction every "
                    f"{options.commits_per_compaction} delta commits, Spark {options.master}"
                )
                echo(f"  web console: {report.console_url}")
                echo(f"  {_engine_line(options)}")
                workers = service.worker_processes
                resident = (
                    ResidentWorker(workers.exit_codes, workers.log_file(0))
                    if workers is not None and options.engine == "spark-worker"
                    else None
                )
                _run(options, table, client, report, echo, started, resident)
            report.seconds = time.monotonic() - started
            if on_report is not None:
                on_report(report)
            if options.keep_running:
                keep_running(report, echo, stop)
        finally:
            echo("Stopping tms")
            service.stop()
    return report


def keep_running(report: DemoReport, echo: Echo, stop: threading.Event | None = None) -> None:
    """Hold the demo's service up for a look until Ctrl-C, SIGTERM or `stop`."""
    echo("")
    echo(f"tms keeps running at {report.service_url}; web console: {report.console_url}")
    echo("Press Ctrl-C (or send SIGTERM) to stop it.")
    why = wait_for_stop(stop)
    echo(f"Received {why}" if why else "Asked to stop")


def _engine_line(options: DemoOptions) -> str:
    if options.engine != "spark-worker":
        return "table services: one spark-submit application per attempt (--engine spark-submit)"
    line = (
        "table services: a resident Spark worker started by the service (TMS_WORKERS=1) "
        "runs them on one warm SparkSession (--engine spark-submit for one application each)"
    )
    if options.storage == "s3":
        line += "; this table has storage options of its own, so its attempts use spark-submit"
    return line


@dataclass(frozen=True)
class _DemoTable:
    base_path: str
    storage_options: dict[str, Any] | None = None
    """Registered with the table (an S3 table's endpoint and credentials)."""
    hudi_rs_options: dict[str, str] | None = None


@contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """`variables` in this process's environment (the demo's writer opens the table by its
    base path), restored on exit."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run(
    options: DemoOptions,
    table: _DemoTable,
    client: ApiClient,
    report: DemoReport,
    echo: Echo,
    started: float,
    worker: ResidentWorker | None = None,
) -> None:
    base_path = table.base_path
    total = options.rounds * options.commits_per_compaction
    writer = DemoWriter(
        base_path,
        options.rows,
        total,
        options.table_version,
        metadata_table=options.metadata_table,
    )
    watcher = Watcher(client, echo, started, options.poll_seconds)
    oracle = _Oracle(base_path, report, table.hudi_rs_options)
    policy = demo_policy(options)
    body: dict[str, Any] = {
        "db_name": "demo",
        "table_name": "trips",
        "base_path": base_path,
        "policy": policy,
    }
    if table.storage_options:
        body["storage_options"] = table.storage_options
    added = client.add_table(body)
    table_id = int(added["id"])
    echo(
        f"Registered the table as id {table_id} with policy: compact every "
        f"{policy['compaction_delta_commits']} delta commits; clean after "
        f"{policy['clean_commits']} commits keeping the latest file version"
    )
    if worker is not None and not table.storage_options:  # else spark-submit anyway
        queue = str(added.get("queue") or "default")
        await_worker(
            client, worker, queue, options.worker_start_seconds, options.poll_seconds, echo
        )
    echo(f"Writing a merge-on-read table at {base_path}, notifying tms after each commit")
    for number in range(1, total + 1):
        instant, what = writer.commit()
        report.commits.append(instant)
        oracle.take_before()
        answer = client.notify_commit(
            callback_payload(base_path, instant), key=DEFAULT_CALLBACK_KEY
        )
        notes = [f"callback stored it as a {answer['action']}"]
        watcher.say(f"deltacommit {instant} ({number}/{total}): {what}; {', '.join(notes)}")
        if number == total:
            report.files_before = data_files(base_path)
            report.slices_before = file_groups(base_path)
        created = answer["operations_created"]
        what_ran = "operation " + ", ".join(str(i) for i in created)
        settled = not created or _settle(watcher, oracle, table_id, options, report, what_ran)
        if not settled:
            return
    report.files_after = data_files(base_path)
    report.slices_after = file_groups(base_path)
    report.operations = [watcher.summaries[k] for k in sorted(watcher.summaries)]


def _settle(
    watcher: Watcher,
    oracle: _Oracle,
    table_id: int,
    options: DemoOptions,
    report: DemoReport,
    what: str,
) -> bool:
    """Wait for the table's operations to end, then check the snapshot; False to stop."""
    if not watcher.wait_idle(table_id, options.wait_seconds):
        watcher.say(f"gave up waiting after {options.wait_seconds:.0f}s")
        report.timed_out = True
        report.operations = [watcher.summaries[k] for k in sorted(watcher.summaries)]
        return False
    same = oracle.check(what)
    files = data_files(oracle.base_path)
    verdict = "reads the same" if same else "DIFFERS"
    watcher.say(f"oracle (hudi-rs) after {what}: {verdict}; {files} data files on storage")
    return True
