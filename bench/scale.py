"""Scheduler tick time, the pull sweep's round time and `GET /v1/operations` latency with
10,000 tables and 100,000 operations.

Loads (with COPY) `--tables` tables and `--operations` operations with their attempts and
events: mostly history (COMPLETED, FAILED, CANCELLED, INVALID), some SCHEDULED and due, some
SCHEDULED after a retry backoff, some RUNNING under other instances' leases (a few expired,
so the first ticks reap them), a few paused tables; then VACUUM ANALYZE.

Tick: one `Scheduler.tick()` (heartbeat + reap, poll own jobs, claim up to
`--max-running` free slots with queue limits, launch through a recording engine, record the
launches, queue depth when due), timed over `--ticks` ticks after 3 warm-up ticks. Between
ticks, untimed, the jobs launched in the previous tick report completion (as they would
through the API), so every tick claims again. Time per SQL statement is reported too.

Pull sweep: `PullSweep.run()` once per simulated scheduler second for `--pull-minutes`
minutes at `--pull-per-minute` listings a minute, storage replaced by a counter (the figure
excludes the storage reads): round time p50/p99 (goal p99 <= 50 ms), and the listings made
in each simulated minute (goal: the setting, every minute).

API: `GET /v1/operations` from a uvicorn process, one request at a time, `--requests` per
case: first page, by status, by table, by action, a deep cursor page, and combinations.

Baselines, same run: `SELECT 1` round trip, a plain indexed `SELECT * FROM operation ORDER BY
id DESC LIMIT 50`, and `GET /healthz` (the HTTP floor). Goals: <= 50 ms each (p50 and p99
reported). Each API case's SQL is run under EXPLAIN ANALYZE; plans are printed for the
slow ones (and all with `--explain`).

    .venv/bin/python bench/scale.py [--tables 10000] [--operations 100000] [--explain]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import logging
import random
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import contextlib

from bench.common import (
    BenchDatabase,
    RecordedJob,
    api_server,
    bench_settings,
    emit,
    fresh_database,
    goal,
    log,
    machine,
    percentiles,
    ratio,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session

    from tms.engines import LaunchSpec

GOAL_MS = 50.0
ACTIONS = [("compaction", 0.5), ("clean", 0.35), ("clustering", 0.15)]
TERMINAL = [("COMPLETED", 0.88), ("FAILED", 0.08), ("CANCELLED", 0.03), ("INVALID", 0.01)]
ERROR = (
    "job process exited with code 1 without reporting a result\n--- last lines of log ---\n"
    "py4j.protocol.Py4JJavaError: An error occurred while calling o123.save.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 3 in stage 7.0 "
    "failed 4 times, most recent failure: Lost task 3.3 in stage 7.0: java.io.IOException"
)


# Data -----------------------------------------------------------------------------------


def _pick(rng: random.Random, weighted: list[tuple[str, float]]) -> str:
    return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]


def _instant(at: dt.datetime) -> str:
    return at.strftime("%Y%m%d%H%M%S%f")[:-3]


@dataclass
class Loaded:
    tables: int = 0
    operations: int = 0
    attempts: int = 0
    events: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    expired_leases: int = 0
    min_operation_id: int = 0
    max_operation_id: int = 0


def populate(db: BenchDatabase, tables: int, operations: int, seed: int = 5) -> Loaded:
    """COPY a realistic history into the fresh database (explicit ids, then setval)."""
    rng = random.Random(seed)
    now = dt.datetime.now(dt.UTC)
    span = dt.timedelta(days=30)
    loaded = Loaded(tables=tables, operations=operations)
    table_queue: dict[int, str] = {}
    table_priority: dict[int, int] = {}
    running_n = max(1, operations // 100)
    due_n = max(1, operations * 3 // 100)
    later_n = max(1, operations // 100)
    pending_n = running_n + due_n + later_n
    if pending_n > tables:
        raise SystemExit("need at least one table per pending operation (5% of operations)")
    # Pending operations are recent: their ids are spread over the newest 15%.
    newest = range(operations - max(pending_n, operations * 15 // 100), operations)
    pending_ids = rng.sample(list(newest), pending_n)
    kinds = ["RUNNING"] * running_n + ["DUE"] * due_n + ["LATER"] * later_n
    pending_kind = dict(zip(pending_ids, kinds, strict=True))
    pending_tables = iter(rng.sample(range(1, tables + 1), pending_n))
    attempt_id = 0
    counts: dict[str, int] = defaultdict(int)
    with db.connect(autocommit=False) as conn:
        with conn.cursor().copy(
            "COPY tbl (id, db_name, table_name, base_path, owner, queue, priority, "
            "enabled_actions, policy, table_type, table_version, last_commit_instant, "
            "delta_commits_since_compaction, commits_since_clean, last_notification_at, "
            "paused, created_at, updated_at) FROM STDIN"
        ) as copy:
            for t in range(1, tables + 1):
                queue = "etl" if rng.random() < 0.2 else "default"
                priority = 10 if rng.random() < 0.05 else 0
                table_queue[t], table_priority[t] = queue, priority
                mor = rng.random() < 0.8
                created = now - span - dt.timedelta(minutes=rng.randint(0, 10_000))
                copy.write_row(
                    (
                        t,
                        f"db_{t % 40:02d}",
                        f"table_{t:05d}",
                        f"s3a://lake/db_{t % 40:02d}/table_{t:05d}",
                        f"team_{t % 17}",
                        queue,
                        priority,
                        "{compaction,clean}" if mor else "{clean}",
                        "{}",
                        "MERGE_ON_READ" if mor else "COPY_ON_WRITE",
                        6,
                        _instant(now - dt.timedelta(minutes=rng.randint(0, 600))),
                        rng.randint(0, 4),
                        rng.randint(0, 9),
                        now - dt.timedelta(minutes=rng.randint(0, 600)),
                        rng.random() < 0.01,
                        created,
                        created,
                    )
                )
        attempts: list[tuple[Any, ...]] = []
        events: list[tuple[Any, ...]] = []
        with conn.cursor().copy(
            "COPY operation (id, tbl_id, action, instant, status, queue, priority, max_retries, "
            "run_times, next_run_at, lease_owner, lease_expires_at, last_heartbeat_at, "
            "current_attempt_id, is_deleted, created_at, updated_at, scheduled_at, "
            "finished_at, last_error, result) FROM STDIN"
        ) as copy:
            for i in range(operations):
                op_id = i + 1
                created = now - span + span * (i / operations)
                kind = pending_kind.get(i)
                tbl = next(pending_tables) if kind else rng.randint(1, tables)
                action = _pick(rng, ACTIONS)
                status = {"RUNNING": "RUNNING", "DUE": "SCHEDULED", "LATER": "SCHEDULED"}.get(
                    kind or "", ""
                ) or _pick(rng, TERMINAL)
                counts[status] += 1
                instant = None if kind and rng.random() < 0.7 else _instant(created)
                # Attempts: outcomes in order; the last one is the current (RUNNING) one.
                if status == "COMPLETED":
                    outcomes = ["FAILED", "SUCCEEDED"] if rng.random() < 0.1 else ["SUCCEEDED"]
                elif status == "FAILED":
                    outcomes = ["FAILED"] * 4
                elif status == "CANCELLED":
                    outcomes = ["CANCELLED"] if rng.random() < 0.5 else []
                elif status == "RUNNING":
                    outcomes = (["LOST"] if rng.random() < 0.2 else []) + ["RUNNING"]
                elif kind == "LATER":
                    outcomes = ["FAILED"] * rng.randint(1, 2)
                else:
                    outcomes = ["FAILED"] if rng.random() < 0.2 else []
                events.append((op_id, None, None, "SCHEDULED", created, "policy: threshold"))
                at = created + dt.timedelta(seconds=rng.randint(1, 60))
                current = None
                for number, outcome in enumerate(outcomes, 1):
                    attempt_id += 1
                    finished = None if outcome == "RUNNING" else at + dt.timedelta(minutes=3)
                    attempts.append(
                        (
                            attempt_id,
                            op_id,
                            number,
                            f"instance-{attempt_id % 3}",
                            at,
                            finished,
                            outcome,
                            {"SUCCEEDED": 0, "FAILED": 1}.get(outcome),
                            f"local-{attempt_id}",
                            f"/var/log/tms/{op_id}/{attempt_id}.log",
                            ERROR if outcome in ("FAILED", "LOST") else None,
                            hashlib.sha256(str(attempt_id).encode()).hexdigest()
                            if outcome == "RUNNING"
                            else None,
                            json.dumps({"files_written": 12, "bytes_written": 123456789})
                            if outcome == "SUCCEEDED"
                            else None,
                        )
                    )
                    events.append((op_id, attempt_id, "SCHEDULED", "RUNNING", at, "claimed"))
                    if outcome != "RUNNING":
                        to = {"SUCCEEDED": "COMPLETED", "CANCELLED": "CANCELLED"}.get(outcome)
                        retried = number < len(outcomes) or status == "SCHEDULED"
                        to = to or ("SCHEDULED" if retried else "FAILED")
                        events.append((op_id, attempt_id, "RUNNING", to, finished, outcome))
                    current = attempt_id
                    at += dt.timedelta(minutes=5)
                running = status == "RUNNING"
                expired = running and loaded.expired_leases < 20 and rng.random() < 0.05
                loaded.expired_leases += expired
                lease = now - dt.timedelta(minutes=1) if expired else now + dt.timedelta(hours=1)
                next_run = (
                    now + dt.timedelta(minutes=rng.randint(5, 60))
                    if kind == "LATER"
                    else created
                    if kind != "DUE"
                    else now - dt.timedelta(seconds=rng.randint(1, 3600))
                )
                terminal = status not in ("SCHEDULED", "RUNNING")
                copy.write_row(
                    (
                        op_id,
                        tbl,
                        action,
                        instant,
                        status,
                        table_queue[tbl],
                        table_priority[tbl],
                        3,
                        len(outcomes),
                        next_run,
                        f"instance-other-{op_id % 2}" if running else None,
                        lease if running else None,
                        now - dt.timedelta(seconds=5) if running else None,
                        current if running else None,
                        terminal and rng.random() < 0.01,
                        created,
                        at,
                        created,
                        at if terminal else None,
                        ERROR if status == "FAILED" else None,
                        json.dumps({"instant": _instant(created), "files_written": 12})
                        if status == "COMPLETED"
                        else None,
                    )
                )
        with conn.cursor().copy(
            "COPY attempt (id, operation_id, number, instance_id, started_at, finished_at, "
            "outcome, exit_code, spark_app_id, log_path, error, token_hash, figures) FROM STDIN"
        ) as copy:
            for row in attempts:
                copy.write_row(row)
        with conn.cursor().copy(
            "COPY operation_event (operation_id, attempt_id, from_status, to_status, at, "
            "reason) FROM STDIN"
        ) as copy:
            for row in events:
                copy.write_row(row)
        for table in ("tbl", "operation", "attempt"):
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT max(id) FROM {table}))"
            )
        conn.commit()
    with db.connect() as conn:
        conn.execute("VACUUM ANALYZE")
    loaded.attempts, loaded.events = len(attempts), len(events)
    loaded.by_status = dict(sorted(counts.items()))
    loaded.min_operation_id, loaded.max_operation_id = 1, operations
    return loaded


# Statement timing -----------------------------------------------------------------------

_LABELS = [
    ("WITH limits AS", "claim_due_operations (claim CTE)"),
    ("WITH expired AS", "reap_expired_leases (reap CTE)"),
    ("pg_advisory_xact_lock", "lock_scheduling"),
    ("UPDATE instance", "heartbeat_instance"),
    ("UPDATE attempt SET token_hash", "issue_attempt_token"),
    ("UPDATE attempt SET log_path", "record_launch"),
    ("SELECT operation.queue, count(*)", "queue_depth"),
]


def _label(statement: str) -> str:
    flat = re.sub(r"\s+", " ", statement).strip()
    for marker, label in _LABELS:
        if marker in flat:
            return label
    return flat[:90]


class StatementTimer:
    """Times every statement an engine executes while `active` (SQLAlchemy events), and
    keeps the last statement and parameters of each kind for EXPLAIN. COMMITs and the
    pool's pre-ping (one per connection checkout) are timed by wrapping the dialect."""

    def __init__(self, engine: Engine) -> None:
        from sqlalchemy import event

        self.active = False
        self.times: dict[str, list[float]] = defaultdict(list)
        self.last: dict[str, tuple[str, Any]] = {}
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        dialect: Any = engine.dialect
        dialect.do_commit = self._timed("COMMIT", dialect.do_commit)
        dialect.do_ping = self._timed("pre-ping on pool checkout (SELECT 1)", dialect.do_ping)

    def _timed(self, label: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                if self.active:
                    self.times[label].append(time.perf_counter() - started)

        return timed

    def _before(self, conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        conn.info.setdefault("bench_started", []).append(time.perf_counter())

    def _after(self, conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        elapsed = time.perf_counter() - conn.info["bench_started"].pop()
        if self.active:
            label = _label(statement)
            self.times[label].append(elapsed)
            self.last[label] = (statement, parameters)

    def report(self, per: int) -> list[dict[str, Any]]:
        """Statements by total time; `per_tick_ms` divides by `per` ticks."""
        rows = [
            {
                "statement": label,
                "calls": len(times),
                "mean_ms": round(sum(times) / len(times) * 1000, 2),
                "per_tick_ms": round(sum(times) / max(per, 1) * 1000, 2),
            }
            for label, times in self.times.items()
        ]
        return sorted(rows, key=lambda r: -r["per_tick_ms"])


def explain(engine: Engine, statement: str, parameters: Any) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) in a transaction that is rolled back (claims write)."""
    with engine.connect() as conn:
        transaction = conn.begin()
        try:
            rows = conn.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + statement, parameters).all()
        finally:
            transaction.rollback()
    return [row[0] for row in rows]


def _execution_ms(plan: list[str]) -> float | None:
    for line in plan:
        if line.startswith("Execution Time:"):
            return float(line.split(":")[1].split()[0])
    return None


# Scheduler ticks ------------------------------------------------------------------------


class RecordingEngine:
    def __init__(self) -> None:
        self.fresh: list[RecordedJob] = []

    def launch(self, launch: LaunchSpec) -> RecordedJob:
        job = RecordedJob(launch)
        self.fresh.append(job)
        return job


def _complete(factory: Callable[[], Session], jobs: list[RecordedJob]) -> None:
    """What the jobs would report through the API: their operations COMPLETED."""
    from tms.store import Attempt, TransitionRefused, complete_operation

    for job in jobs:
        with factory() as session, session.begin():
            attempt = session.get_one(Attempt, job.spec.attempt_id)
            with contextlib.suppress(TransitionRefused):
                complete_operation(session, attempt, figures={"files_written": 1})
        job.code = 0


def measure_ticks(db: BenchDatabase, args: argparse.Namespace) -> dict[str, Any]:
    from tms.engines import EngineRegistry
    from tms.scheduler import Scheduler
    from tms.store import make_engine, make_session_factory, register_instance, session_scope

    # The first ticks reap the expired leases on purpose: no warning per operation.
    logging.getLogger("tms.scheduler").setLevel(logging.ERROR)
    data_dir = Path(tempfile.mkdtemp(prefix="tms-bench-scale-"))
    settings = bench_settings(
        db.url,
        data_dir,
        max_running_per_instance=args.max_running,
        queue_limits={"default": 5000, "etl": 1000},
    )
    engine = make_engine(db.url, pool_size=2)
    timer = StatementTimer(engine)
    factory = make_session_factory(engine)
    recorder = RecordingEngine()
    with session_scope(factory) as session:
        register_instance(session, "bench-scale")
    scheduler = Scheduler(settings, factory, EngineRegistry({"spark": recorder}), "bench-scale")
    warmup = 3
    ticks: list[float] = []
    launched = reaped = exited = reaped_first = 0
    try:
        for i in range(warmup + args.ticks):
            jobs, recorder.fresh = recorder.fresh, []
            _complete(factory, jobs)
            time.sleep(args.tick_pause)
            timer.active = i >= warmup
            started = time.perf_counter()
            report = scheduler.tick()
            elapsed = time.perf_counter() - started
            timer.active = False
            if i == 0:
                reaped_first = len(report.reaped)
            if i >= warmup:
                ticks.append(elapsed)
                launched += len(report.launched)
                reaped += len(report.reaped)
                exited += len(report.exited)
        plans = {}
        for label in ("claim_due_operations (claim CTE)", "reap_expired_leases (reap CTE)"):
            if label in timer.last:
                plan = explain(engine, *timer.last[label])
                plans[label] = {"execution_ms": _execution_ms(plan), "plan": plan}
    finally:
        engine.dispose()
        shutil.rmtree(data_dir, ignore_errors=True)
    statements = timer.report(len(ticks))
    in_sql = sum(s["per_tick_ms"] for s in statements)
    tick_ms = percentiles(ticks)
    return {
        "ticks": len(ticks),
        "warmup_ticks": warmup,
        "pause_between_ticks_s": args.tick_pause,
        "max_running_per_instance": args.max_running,
        "tick_ms": tick_ms,
        "launched": launched,
        "exited_and_noticed": exited,
        "reaped_in_first_tick": reaped_first,
        "reaped_in_measured_ticks": reaped,
        "sql_per_tick_ms": round(in_sql, 2),
        "python_and_commits_per_tick_ms": round(tick_ms.get("mean", 0.0) - in_sql, 2),
        "statements": statements,
        "plans": plans,
    }


# Pull sweep -----------------------------------------------------------------------------


class _CountingReader:
    """Storage left out of the pull figure: counts each timeline listing (the clock's
    minute it fell in), finds no commits."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.listings: list[float] = []

    def timeline(self, target: Any) -> Any:
        from tms.ingest.pulled import PulledTimeline

        self.listings.append(self.clock())
        return PulledTimeline(timeline=None)  # type: ignore[arg-type]

    def new_commits(self, pulled: Any, known: Any) -> list[Any]:
        return []


def measure_pulls(db: BenchDatabase, args: argparse.Namespace) -> dict[str, Any]:
    """The pull sweep over every table: one round per simulated scheduler second (the
    pacer's clock is moved, so `--pull-minutes` minutes take only the rounds' own time),
    each round timed; storage is a counter."""
    from tms.scheduler.pull import PullSweep
    from tms.store import make_engine, make_session_factory

    data_dir = Path(tempfile.mkdtemp(prefix="tms-bench-pull-"))
    settings = bench_settings(
        db.url,
        data_dir,
        pull_listings_per_minute=args.pull_per_minute,
        notification_timeout_seconds=3600,
        pull_sweep_interval_seconds=3600,
    )
    engine = make_engine(db.url, pool_size=2)
    now = [0.0]
    reader = _CountingReader(lambda: now[0])
    sweep = PullSweep(
        make_session_factory(engine), settings, "bench-pull", reader=reader, clock=lambda: now[0]
    )
    rounds: list[float] = []
    try:
        for _ in range(int(args.pull_minutes * 60)):
            started = time.perf_counter()
            sweep.run()
            rounds.append(time.perf_counter() - started)
            now[0] += settings.scheduler_interval_seconds
    finally:
        engine.dispose()
        shutil.rmtree(data_dir, ignore_errors=True)
    per_minute = [0] * int(args.pull_minutes)
    for at in reader.listings:
        per_minute[min(int(at // 60), len(per_minute) - 1)] += 1
    return {
        "tables": args.tables,
        "setting_listings_per_minute": args.pull_per_minute,
        "simulated_minutes": args.pull_minutes,
        "listings_per_minute": per_minute,
        "round_ms": percentiles(rounds),
        "tables_per_round": round(args.pull_per_minute * settings.scheduler_interval_seconds / 60),
    }


# API latency ----------------------------------------------------------------------------


def api_cases(loaded: Loaded, tables: int) -> dict[str, Callable[[random.Random], str]]:
    deep = loaded.min_operation_id + 2000
    middle = (loaded.min_operation_id + loaded.max_operation_id) // 2
    base = "/v1/operations"
    return {
        "first_page": lambda r: f"{base}?limit=50",
        "status_SCHEDULED": lambda r: f"{base}?status=SCHEDULED",
        "status_FAILED": lambda r: f"{base}?status=FAILED",
        "status_RUNNING_or_SCHEDULED": lambda r: f"{base}?status=RUNNING,SCHEDULED",
        "by_table": lambda r: f"{base}?table_id={r.randint(1, tables)}",
        "by_table_and_status": lambda r: f"{base}?table_id={r.randint(1, tables)}&status=COMPLETED",
        "action_clustering": lambda r: f"{base}?action=clustering",
        "deep_cursor": lambda r: f"{base}?cursor={deep}",
        "middle_cursor_status_CANCELLED": lambda r: f"{base}?status=CANCELLED&cursor={middle}",
        "deep_cursor_status_INVALID": lambda r: f"{base}?status=INVALID&cursor={deep}",
    }


def _timed_gets(
    http: httpx.Client, path: Callable[[random.Random], str], count: int, rng: random.Random
) -> dict[str, Any]:
    for _ in range(10):  # warm-up: statement caches, prepared statements, buffers
        http.get(path(rng)).raise_for_status()
    latencies = []
    items = 0
    for _ in range(count):
        started = time.perf_counter()
        response = http.get(path(rng))
        latencies.append(time.perf_counter() - started)
        response.raise_for_status()
        items += len(response.json().get("items", []))
    return {"latency_ms": percentiles(latencies), "items_per_page": round(items / count, 1)}


def measure_api(db: BenchDatabase, loaded: Loaded, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(3)
    cases = api_cases(loaded, args.tables)
    results: dict[str, Any] = {}
    with (
        api_server(db.url, workers=1, pool_size=10) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        results["healthz_http_floor"] = _timed_gets(http, lambda r: "/healthz", args.requests, rng)
        for name, path in cases.items():
            results[name] = _timed_gets(http, path, args.requests, rng)
            results[name]["example"] = path(random.Random(1))
            log(f"  {name}: {results[name]['latency_ms']}")
    return results


def sql_baselines(db: BenchDatabase, count: int) -> dict[str, Any]:
    """`SELECT 1` and the plain newest-50 page, straight through psycopg."""
    out = {}
    with db.connect() as conn:
        for name, statement in (
            ("select_1", "SELECT 1"),
            ("select_operation_newest_50", "SELECT * FROM operation ORDER BY id DESC LIMIT 50"),
        ):
            for _ in range(10):
                conn.execute(statement).fetchall()
            latencies = []
            for _ in range(count):
                started = time.perf_counter()
                conn.execute(statement).fetchall()
                latencies.append(time.perf_counter() - started)
            out[name] = percentiles(latencies)
    return out


def explain_api(db: BenchDatabase, loaded: Loaded, args: argparse.Namespace) -> dict[str, Any]:
    """The SQL each API case runs (`list_operations` + `operations_out`), EXPLAIN ANALYZEd."""
    from tms.api.responses import operations_out
    from tms.store import (
        OperationStatus,
        ServiceAction,
        list_operations,
        make_engine,
        make_session_factory,
    )

    engine = make_engine(db.url, pool_size=1)
    timer = StatementTimer(engine)
    factory = make_session_factory(engine)
    out: dict[str, Any] = {}
    try:
        for name, path in api_cases(loaded, args.tables).items():
            query = httpx.URL(path(random.Random(1))).params
            timer.last.clear()
            timer.active = True
            with factory() as session:
                rows = list_operations(
                    session,
                    tbl_id=int(query["table_id"]) if "table_id" in query else None,
                    status=[OperationStatus(v) for v in query.get("status", "").split(",") if v]
                    or None,
                    action=ServiceAction(query["action"]) if "action" in query else None,
                    limit=int(query.get("limit", 50)),
                    before_id=int(query["cursor"]) if "cursor" in query else None,
                )
                operations_out(session, rows)
            timer.active = False
            out[name] = []
            for statement, parameters in timer.last.values():
                plan = explain(engine, statement, parameters)
                out[name].append(
                    {
                        "sql": re.sub(r"\s+", " ", statement)[:300],
                        "execution_ms": _execution_ms(plan),
                        "plan": plan,
                    }
                )
    finally:
        engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(__doc__ or "").split("\n\n", 1)[1],
    )
    parser.add_argument("--tables", type=int, default=10_000, help="registered tables (10000)")
    parser.add_argument("--operations", type=int, default=100_000, help="operations (100000)")
    parser.add_argument("--ticks", type=int, default=50, help="measured scheduler ticks (50)")
    parser.add_argument("--tick-pause", type=float, default=0.1, help="seconds between (0.1)")
    parser.add_argument("--max-running", type=int, default=4, help="jobs per instance (4)")
    parser.add_argument("--requests", type=int, default=200, help="GETs per API case (200)")
    parser.add_argument(
        "--pull-per-minute", type=int, default=600, help="pull listings per minute (600)"
    )
    parser.add_argument("--pull-minutes", type=int, default=3, help="simulated minutes (3)")
    parser.add_argument("--explain", action="store_true", help="print every plan, not only slow")
    parser.add_argument("--keep-db", action="store_true", help="keep the database afterwards")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()

    with fresh_database("tms_bench_scale", keep=args.keep_db) as db:
        facts = machine(db)
        log(f"database {db.name}: loading {args.tables} tables, {args.operations} operations")
        started = time.perf_counter()
        loaded = populate(db, args.tables, args.operations)
        load_seconds = time.perf_counter() - started
        log(f"  loaded in {load_seconds:.1f}s: {loaded.by_status}")
        baselines = sql_baselines(db, args.requests)
        log(f"baselines: {baselines}")
        log(f"scheduler: {args.ticks} ticks")
        ticks = measure_ticks(db, args)
        log(f"  tick {ticks['tick_ms']}")
        log(f"pull sweep: {args.pull_minutes} simulated minutes at {args.pull_per_minute}/min")
        pulls = measure_pulls(db, args)
        log(f"  round {pulls['round_ms']}, listings per minute {pulls['listings_per_minute']}")
        log(f"GET /v1/operations: {args.requests} requests per case")
        api = measure_api(db, loaded, args)
        plans = explain_api(db, loaded, args)

    floor = api["healthz_http_floor"]["latency_ms"]
    newest = baselines["select_operation_newest_50"]
    cases: dict[str, Any] = {}
    for name, result in api.items():
        if name == "healthz_http_floor":
            continue
        latency = result["latency_ms"]
        slow = (latency.get("p50") or 0.0) > GOAL_MS or (latency.get("p99") or 0.0) > GOAL_MS
        case_plans = plans.get(name, [])
        cases[name] = {
            **result,
            "ratio_p50_to_healthz_p50": ratio(latency.get("p50", 0.0), floor.get("p50", 0.0)),
            "ratio_p50_to_sql_newest_50_p50": ratio(
                latency.get("p50", 0.0), newest.get("p50", 0.0)
            ),
            "sql_execution_ms": [p["execution_ms"] for p in case_plans],
            "goal_p99_ms": goal(latency.get("p99"), GOAL_MS),
        }
        if slow or args.explain:
            cases[name]["plans"] = case_plans
    tick_ms = ticks["tick_ms"]
    figures: dict[str, Any] = {
        "benchmark": "scale",
        "machine": facts,
        "data": {**loaded.__dict__, "load_seconds": round(load_seconds, 1)},
        "baselines": {**baselines, "healthz_http_floor": floor},
        "scheduler_tick": {
            **ticks,
            "ratio_p50_to_select_1_p50": ratio(
                tick_ms.get("p50", 0.0), baselines["select_1"].get("p50", 0.0)
            ),
            "goal_p99_ms": goal(tick_ms.get("p99"), GOAL_MS),
        },
        "list_operations": cases,
        "pull_sweep": {
            **pulls,
            "ratio_round_p50_to_select_1_p50": ratio(
                pulls["round_ms"].get("p50", 0.0), baselines["select_1"].get("p50", 0.0)
            ),
            "goal_round_p99_ms": goal(pulls["round_ms"].get("p99"), GOAL_MS),
            "goal_listings_per_minute": all(
                n == args.pull_per_minute for n in pulls["listings_per_minute"]
            ),
        },
    }
    if not args.explain and (tick_ms.get("p99") or 0.0) <= GOAL_MS:
        for entry in figures["scheduler_tick"]["plans"].values():
            entry["plan"] = entry["plan"][:3]
    emit(figures, args.json_out)


if __name__ == "__main__":
    main()
