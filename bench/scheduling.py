"""Delay from the commit notification that crosses a policy threshold to the job's launch.

Registers `--tables` merge-on-read tables with `compaction_delta_commits = --commits` (K),
sends K-1 callbacks to each through the API (uvicorn, its own process), then the K-th
callbacks one by one at random gaps (so they fall anywhere within a scheduler tick). A
scheduler process runs the real `Scheduler.run_forever` loop against the same database with
a recording engine (no Spark: it notes the launch time and the job never ends). Per table:
time from the K-th callback's HTTP 2xx to `Engine.launch` of its compaction (one monotonic
clock, same machine; negative when the launch beat the response to the client).

Measured once per `--intervals` entry (scheduler_interval_seconds; the default setting is 1 s).
Baseline, same run: the bare claim of one due row (`claim_due_operations`, limit 1, in its own
transaction) on an otherwise idle database. Goal: p50 <= 200 ms.

    .venv/bin/python bench/scheduling.py [--tables 100] [--intervals 1.0,0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import multiprocessing as mp
import queue
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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
    from multiprocessing.synchronize import Event as EventType

    from tms.engines import LaunchSpec

CALLBACK_PATH = "/v1/hoodie/service/commit"
HEADERS = {"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}


# The scheduler process ------------------------------------------------------------------


class RecordingEngine:
    """Puts `(operation_id, attempt_id, monotonic time)` of each launch on a queue; its jobs
    run until the benchmark ends."""

    def __init__(self, out: mp.Queue[tuple[int, int, float]]) -> None:
        self.out = out

    def launch(self, launch: LaunchSpec) -> RecordedJob:
        self.out.put((launch.operation_id, launch.attempt_id, time.monotonic()))
        return RecordedJob(launch)


def run_scheduler(
    url: str,
    interval: float,
    max_running: int,
    out: mp.Queue[tuple[int, int, float]],
    ready: EventType,
    stop: EventType,
) -> None:
    """Process target: the real scheduler loop with the recording engine."""
    import threading

    from tms.engines import EngineRegistry
    from tms.scheduler import create_scheduler
    from tms.store import make_engine, make_session_factory

    data_dir = Path(tempfile.mkdtemp(prefix="tms-bench-scheduler-"))
    settings = bench_settings(
        url,
        data_dir,
        scheduler_interval_seconds=interval,
        max_running_per_instance=max_running,
    )
    engine = make_engine(url, pool_size=2)
    registry = EngineRegistry({"spark": RecordingEngine(out)})
    scheduler = create_scheduler(settings, make_session_factory(engine), engines=registry)
    stopping = threading.Event()

    def relay() -> None:  # a process-shared event cannot be passed to run_forever
        stop.wait()
        stopping.set()

    threading.Thread(target=relay, daemon=True).start()
    ready.set()
    try:
        scheduler.run_forever(stopping)
    finally:
        engine.dispose()
        shutil.rmtree(data_dir, ignore_errors=True)


# Setup and baseline ---------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    id: int
    name: str
    base_path: str


def register_tables(db: BenchDatabase, prefix: str, count: int, commits: int) -> list[Table]:
    """Merge-on-read tables whose compaction triggers after `commits` delta commits (clean
    and clustering off, so the K-th commit creates exactly one operation)."""
    from tms.store import (
        TableType,
        make_engine,
        make_session_factory,
        register_table,
        session_scope,
    )

    engine = make_engine(db.url, pool_size=1)
    tables = []
    try:
        with session_scope(make_session_factory(engine)) as session:
            for i in range(count):
                name = f"{prefix}_{i:04d}"
                row = register_table(
                    session,
                    db_name="bench",
                    table_name=name,
                    base_path=f"/nonexistent/tms-bench/{name}",
                    table_type=TableType.MERGE_ON_READ,
                    table_version=6,
                    policy={
                        "compaction_delta_commits": commits,
                        "clean_commits": 0,
                        "clustering_commits": 0,
                    },
                ).table
                tables.append(Table(row.id, name, row.base_path))
    finally:
        engine.dispose()
    return tables


def claim_baseline(db: BenchDatabase, rounds: int) -> dict[str, Any]:
    """`claim_due_operations(limit=1)` of one due operation, in its own committed
    transaction, `rounds` times on an idle database; and a `SELECT 1` round trip."""
    from sqlalchemy import text

    from tms.store import (
        ServiceAction,
        claim_due_operations,
        complete_operation,
        make_engine,
        make_session_factory,
        session_scope,
        submit_operation,
    )

    tables = register_tables(db, "baseline", rounds, 0)
    engine = make_engine(db.url, pool_size=1)
    factory = make_session_factory(engine)
    claims: list[float] = []
    select_one: list[float] = []
    try:
        for table in tables:
            with session_scope(factory) as session:
                submit_operation(session, tbl_id=table.id, action=ServiceAction.COMPACTION)
            started = time.perf_counter()
            with session_scope(factory) as session:
                claimed = claim_due_operations(session, "baseline", limit=1, lease_seconds=60)
            claims.append(time.perf_counter() - started)
            assert len(claimed) == 1, claimed
            with session_scope(factory) as session:
                complete_operation(session, claimed[0].attempt)
            with engine.connect() as conn:
                started = time.perf_counter()
                conn.execute(text("SELECT 1"))
                select_one.append(time.perf_counter() - started)
    finally:
        engine.dispose()
    # The first rounds pay for statement preparation and a cold cache; drop them.
    warm = max(1, rounds // 10)
    return {
        "claim_one_due_ms": percentiles(claims[warm:]),
        "select_1_ms": percentiles(select_one[warm:]),
    }


# One measured interval ------------------------------------------------------------------


async def _prime(url: str, tables: list[Table], commits: int, start: int) -> int:
    """K-1 delta commits per table, 8 in flight; returns the next instant counter."""
    counter = start
    semaphore = asyncio.Semaphore(8)
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:

        async def notify(table: Table, instant: int) -> None:
            async with semaphore:
                response = await http.post(
                    CALLBACK_PATH, json=payload(table, instant), headers=HEADERS
                )
                response.raise_for_status()

        jobs = []
        for table in tables:
            for _ in range(commits - 1):
                jobs.append(notify(table, counter))
                counter += 1
        await asyncio.gather(*jobs)
    return counter


def payload(table: Table, n: int) -> dict[str, Any]:
    """A released writer's delta commit: a log-file write stat, lost Options."""
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=n)
    instant = when.strftime("%Y%m%d%H%M%S%f")[:-3]
    file_id = f"{table.id:08d}-aaaa-bbbb-cccc-000000000000-0"
    return {
        "commitTime": instant,
        "tableName": table.name,
        "basePath": table.base_path,
        "commitActionType": {"present": True},
        "extraMetadata": {"present": True},
        "hoodieWriteStat": [
            {
                "fileId": file_id,
                "path": f"p=1/.{file_id}_20260101000000000.log.{1 + n % 7}_0-1-0",
                "partitionPath": "p=1",
                "prevCommit": "20260101000000000",
                "numWrites": 120,
                "numUpdateWrites": 120,
                "totalWriteBytes": 9800,
                "fileSizeInBytes": 9800,
                "logVersion": 1 + n % 7,
                "logOffset": 0,
                "baseFile": f"{file_id}_0-1-0_20260101000000000.parquet",
                "logFiles": [f".{file_id}_20260101000000000.log.1_0-1-0"],
                "totalLogRecords": 0,
                "runtimeStats": {"totalUpsertTime": 40},
            }
        ],
    }


def measure_interval(
    db: BenchDatabase,
    server_url: str,
    interval: float,
    args: argparse.Namespace,
    counter: int,
) -> tuple[dict[str, Any], int]:
    """One scheduler interval: fresh tables, prime them, cross each threshold, collect."""
    tag = f"i{int(interval * 1000)}ms"
    tables = register_tables(db, tag, args.tables, args.commits)
    counter = asyncio.run(_prime(server_url, tables, args.commits, counter))
    context = mp.get_context("spawn")
    launches: mp.Queue[tuple[int, int, float]] = context.Queue()
    ready, stop = context.Event(), context.Event()
    process = context.Process(
        target=run_scheduler,
        args=(db.url, interval, args.tables + 10, launches, ready, stop),
        name="tms-bench-scheduler",
    )
    process.start()
    acked: dict[int, float] = {}
    launched: dict[int, float] = {}
    rng = random.Random(11)
    try:
        if not ready.wait(60):
            raise RuntimeError("the scheduler process did not start")
        time.sleep(2 * interval + 0.5)  # let it settle into its rhythm
        order = list(tables)
        rng.shuffle(order)
        with httpx.Client(base_url=server_url, timeout=60) as http:
            for table in order:
                time.sleep(rng.uniform(0, 2 * args.gap))
                response = http.post(CALLBACK_PATH, json=payload(table, counter), headers=HEADERS)
                at = time.monotonic()
                counter += 1
                response.raise_for_status()
                created = response.json()["operations_created"]
                if len(created) != 1:
                    raise RuntimeError(f"{table.name}: expected one operation, got {created}")
                acked[created[0]] = at
        deadline = time.monotonic() + 10 * interval + 10
        while len(launched) < len(acked) and time.monotonic() < deadline:
            try:
                operation_id, _, at = launches.get(timeout=0.5)
            except queue.Empty:
                continue
            launched[operation_id] = at
    finally:
        stop.set()
        process.join(30)
        if process.is_alive():
            process.terminate()
            process.join(5)
    delays = [launched[op] - at for op, at in acked.items() if op in launched]
    result = {
        "scheduler_interval_s": interval,
        "tables": len(tables),
        "launched": len(delays),
        "missing_launches": len(acked) - len(delays),
        "delay_ms": percentiles(delays, (50, 95)),
        "min_ms": round(min(delays) * 1000, 2) if delays else None,
    }
    return result, counter


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(__doc__ or "").split("\n\n", 1)[1],
    )
    parser.add_argument("--tables", type=int, default=100, help="tables per interval (100)")
    parser.add_argument("--commits", type=int, default=5, help="K = compaction_delta_commits (5)")
    parser.add_argument(
        "--intervals",
        default="1.0,0.2",
        help="scheduler intervals in seconds, comma-separated (1.0 = default setting; 1.0,0.2)",
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=0.1,
        help="mean seconds between threshold-crossing callbacks (uniform 0..2×gap; 0.1)",
    )
    parser.add_argument("--baseline-rounds", type=int, default=100, help="claims timed (100)")
    parser.add_argument("--keep-db", action="store_true", help="keep the database afterwards")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    intervals = [float(x) for x in args.intervals.split(",") if x.strip()]

    with fresh_database("tms_bench_scheduling", keep=args.keep_db) as db:
        facts = machine(db)
        log(f"database {db.name}; baseline: {args.baseline_rounds} claims of one due row")
        baseline = claim_baseline(db, args.baseline_rounds)
        log(f"  claim p50 {baseline['claim_one_due_ms'].get('p50')} ms")
        runs = []
        counter = 0
        with api_server(db.url, workers=1, pool_size=10) as server:
            for interval in intervals:
                log(f"scheduler interval {interval:g}s: {args.tables} tables, K={args.commits}")
                run, counter = measure_interval(db, server.url, interval, args, counter)
                log(f"  delay {run['delay_ms']}")
                runs.append(run)

    claim_p50 = baseline["claim_one_due_ms"].get("p50")
    for run in runs:
        p50 = run["delay_ms"].get("p50")
        run["ratio_p50_to_claim_p50"] = ratio(p50 or 0.0, claim_p50 or 0.0)
        run["goal_p50_ms"] = goal(p50, 200.0)
    figures: dict[str, Any] = {
        "benchmark": "scheduling",
        "machine": facts,
        "tables_per_interval": args.tables,
        "compaction_delta_commits": args.commits,
        "mean_gap_between_threshold_callbacks_s": args.gap,
        "engine": "recording engine: notes the launch, starts nothing; jobs never end "
        f"(max_running_per_instance = {args.tables + 10})",
        "baseline": baseline,
        "runs": runs,
    }
    emit(figures, args.json_out)


if __name__ == "__main__":
    main()
