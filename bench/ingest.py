"""Durable commit notifications per second against PostgreSQL's own insert ceiling.

`--clients` (32) concurrent clients POST Hudi commit callbacks (`/v1/hoodie/service/commit`)
for `--tables` (50) pre-registered tables over loopback; each 2xx means the commit row, the
counters and any policy operations are committed. Payloads are distinct and shaped like a
released writer's (`{"present": true}` for lost Options, unknown fields, 1-3 write stats,
log-file stats on merge-on-read tables). The API runs under uvicorn in its own process(es),
once per `--configs` entry (workers:pool_size), each for a warm-up and `--duration` seconds.
The load generator is a minimal asyncio HTTP/1.1 client (`--client raw`, one keep-alive
connection per client, as pgbench keeps its connections); `--client httpx` uses
httpx.AsyncClient, which on 2 cores takes a large share of the CPU the server needs. The
best configuration also runs with a new connection per callback, for context (`Connection:
close`, as a Hudi writer whose callbacks are minutes apart reconnects each time).

Baseline, same run: `pgbench -M prepared -c 32 -j 2 -n -f script.sql` doing the same single-row
`INSERT … ON CONFLICT DO NOTHING` into a scratch copy of the `commit` table, before and after
the service runs (the ceiling is their mean). A second pgbench script does the whole database
work of one notification (find the table, insert the commit and bump its counters in one
statement), and the best server configuration answers `GET /healthz` under the same load
(the HTTP stack's own ceiling on this machine), both for context. Goals: rps >= 30% of the
ceiling, p99 <= 50 ms.

    .venv/bin/python bench/ingest.py [--duration 15] [--configs 1:4,2:8] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import functools
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    ApiServer,
    BenchDatabase,
    api_server,
    cpu_sample,
    emit,
    fresh_database,
    goal,
    log,
    machine,
    percentiles,
    profile_breakdown,
    profile_summary,
    py_spy,
    ratio,
)

CALLBACK_PATH = "/v1/hoodie/service/commit"
CALLBACK_KEY = "hudi_write_commit_http_callback"
FLOOR_PATH = "/healthz"
PARTITIONS = ["2026/01/01", "2026/01/02", "2026/01/03", "2026/01/04"]

# The insert `record_commits` makes (per row), into a scratch copy of `commit` (same columns,
# defaults, unique key); each client owns one table (one writer per table, like the service
# run).
INSERT_SCRIPT = """\
\\set tbl 1 + :client_id % {tables}
\\set k :k + 1
\\set key :client_id * 100000000 + :k
INSERT INTO bench_commit (tbl_id, instant, action, records, bytes, files, log_files, received_at)
VALUES (:tbl, lpad(CAST(:key AS text), 17, '0'), 'deltacommit',
        30, 12288, 3, 2, now())
ON CONFLICT (tbl_id, instant) DO NOTHING;
"""

# The database work of one notification without policies, if it had a transaction of its
# own: look the table up by base path, insert the commit and bump the counters.
FULL_SCRIPT = """\
\\set tbl 1 + :client_id % {tables}
\\set k :k + 1
\\set idx :tbl - 1
\\set key :client_id * 100000000 + :k
BEGIN;
SELECT id, table_type, policy FROM bench_tbl
WHERE base_path = '{base}' || lpad(CAST(:idx AS text), 3, '0');
WITH inserted AS (
  INSERT INTO bench_commit (tbl_id, instant, action, records, bytes, files, log_files, received_at)
  VALUES (:tbl, lpad(CAST(:key AS text), 17, '0'), 'deltacommit',
          30, 12288, 3, 2, now())
  ON CONFLICT (tbl_id, instant) DO NOTHING RETURNING tbl_id)
UPDATE bench_tbl SET delta_commits_since_compaction = delta_commits_since_compaction + 1,
  commits_since_clean = commits_since_clean + 1,
  commits_since_clustering = commits_since_clustering + 1,
  last_commit_instant = greatest(last_commit_instant, 'x'), last_notification_at = now(),
  updated_at = now()
WHERE id = (SELECT tbl_id FROM inserted) RETURNING *;
COMMIT;
"""


# Payloads -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchTable:
    id: int
    name: str
    base_path: str
    merge_on_read: bool
    file_ids: tuple[str, ...]


class Payloads:
    """Distinct callback bodies: table i receives every `len(tables)`-th commit (one writer
    per table), instants increase by 1 ms per notification. `prepare` renders bodies ahead
    of a measured run, so the load generator spends its CPU on sending, not on JSON."""

    def __init__(self, tables: list[BenchTable], seed: int = 7) -> None:
        self.tables = tables
        self.rng = random.Random(seed)
        self.count = 0  # sent
        self.acked = 0
        self.generated = 0
        self.start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        self._ready: deque[bytes] = deque()

    def prepare(self, count: int) -> None:
        self._ready.extend(self._make() for _ in range(max(count - len(self._ready), 0)))

    def next(self) -> bytes:
        self.count += 1
        return self._ready.popleft() if self._ready else self._make()

    def _make(self) -> bytes:
        n = self.generated
        self.generated += 1
        table = self.tables[n % len(self.tables)]
        when = self.start + dt.timedelta(milliseconds=n)
        instant = when.strftime("%Y%m%d%H%M%S%f")[:-3]
        rng = self.rng
        previous = (when - dt.timedelta(minutes=5)).strftime("%Y%m%d%H%M%S%f")[:-3]
        if table.merge_on_read:
            stats = [_stat(table, rng, previous, log=True) for _ in range(rng.randint(1, 2))]
            stats += [_stat(table, rng, instant, log=False) for _ in range(rng.randint(0, 1))]
            action = "deltacommit"
        else:
            stats = [_stat(table, rng, instant, log=False) for _ in range(rng.randint(2, 3))]
            action = "commit"
        roll = rng.random()
        body: dict[str, Any] = {
            "commitTime": instant,
            "tableName": table.name,
            "basePath": table.base_path,
            "hoodieWriteStat": stats,
            "extraMetadata": {"present": True},
            "prevFilePaths": {"present": False},
            "extraContext": {"present": False},
            "someFieldFromANewerHudi": {"nested": [1, 2]},
        }
        if roll < 0.85:  # released writers lose the value of their Options
            body["commitActionType"] = {"present": True}
        elif roll < 0.95:
            body["commitActionType"] = action
        return json.dumps(body, separators=(",", ":")).encode()


def _stat(table: BenchTable, rng: random.Random, base: str, *, log: bool) -> dict[str, Any]:
    file_id = rng.choice(table.file_ids)
    partition = rng.choice(PARTITIONS)
    writes = rng.randint(50, 5000)
    size = writes * rng.randint(90, 160)
    stat: dict[str, Any] = {
        "fileId": file_id,
        "path": f"{partition}/.{file_id}_{base}.log.{rng.randint(1, 9)}_0-12-34"
        if log
        else f"{partition}/{file_id}_0-12-34_{base}.parquet",
        "prevCommit": base,
        "numWrites": writes,
        "numDeletes": rng.randint(0, 5),
        "numUpdateWrites": writes if log else 0,
        "numInserts": 0 if log else writes,
        "totalWriteBytes": size,
        "totalWriteErrors": 0,
        "tempPath": None,
        "partitionPath": partition,
        "totalLogRecords": 0,
        "totalLogFilesCompacted": 0,
        "totalLogSizeCompacted": 0,
        "totalUpdatedRecordsCompacted": 0,
        "totalLogBlocks": 0,
        "totalCorruptLogBlock": 0,
        "totalRollbackBlocks": 0,
        "fileSizeInBytes": size,
        "minEventTime": None,
        "maxEventTime": None,
        "runtimeStats": {"totalScanTime": 0, "totalUpsertTime": rng.randint(5, 900)},
        "cdcStats": None,
        "columnStats": {"present": False},
        "recordsStats": {"present": False},
    }
    if log:
        stat |= {
            "logVersion": rng.randint(1, 9),
            "logOffset": 0,
            "baseFile": f"{file_id}_0-12-34_{base}.parquet",
            "logFiles": [f".{file_id}_{base}.log.1_0-12-34"],
        }
    return stat


def register_tables(db: BenchDatabase, count: int, lake: str) -> list[BenchTable]:
    """`count` tables through the store's own `register_table`: 4 of 5 merge-on-read."""
    from tms.store import (
        TableType,
        make_engine,
        make_session_factory,
        register_table,
        session_scope,
    )

    engine = make_engine(db.url, pool_size=1)
    tables: list[BenchTable] = []
    try:
        with session_scope(make_session_factory(engine)) as session:
            for i in range(count):
                mor = i % 5 != 4
                name = f"orders_{i:03d}"
                base = f"{lake}/{i:03d}"
                row = register_table(
                    session,
                    db_name="sales",
                    table_name=name,
                    base_path=base,
                    owner="etl",
                    table_type=TableType.MERGE_ON_READ if mor else TableType.COPY_ON_WRITE,
                    table_version=6,
                ).table
                ids = tuple(f"{uuid.uuid4()}-0" for _ in range(8))
                tables.append(BenchTable(row.id, name, base, mor, ids))
    finally:
        engine.dispose()
    return tables


# Load generators ------------------------------------------------------------------------


@dataclass
class Load:
    """What one load phase measured."""

    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def ok(self) -> int:
        return sum(n for status, n in self.statuses.items() if 200 <= status < 300)


Sender = Callable[[bytes], Awaitable[int]]


async def _drive(senders: list[Sender], payloads: Payloads, seconds: float, limit: int) -> Load:
    """Each sender is one client with one keep-alive connection, sending back to back."""
    load = Load()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds

    async def client(send: Sender) -> None:
        while loop.time() < deadline and (limit <= 0 or payloads.count < limit):
            body = payloads.next()
            started = time.perf_counter()
            try:
                status = await send(body)
            except (
                OSError,
                httpx.HTTPError,
                asyncio.IncompleteReadError,
                ValueError,
                IndexError,
            ) as exc:
                load.errors[type(exc).__name__] += 1
                continue
            load.latencies.append(time.perf_counter() - started)
            load.statuses[status] += 1
            payloads.acked += 200 <= status < 300

    started = time.perf_counter()
    await asyncio.gather(*(client(s) for s in senders))
    load.seconds = time.perf_counter() - started
    return load


async def httpx_load(
    url: str,
    clients: int,
    payloads: Payloads,
    seconds: float,
    limit: int = 0,
    *,
    floor: bool = False,
    keep_alive: bool = True,
) -> Load:
    """httpx.AsyncClient with `clients` pooled connections and as many concurrent tasks
    (always keep-alive); `floor`: `GET /healthz` instead of callbacks (the HTTP stack
    alone, no database)."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Content-Type": "application/json", "HUDI-CALLBACK-KEY": CALLBACK_KEY}
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:

        async def send(body: bytes) -> int:
            if floor:
                return (await http.get(FLOOR_PATH)).status_code
            response = await http.post(CALLBACK_PATH, content=body, headers=headers)
            return response.status_code

        return await _drive([send] * clients, payloads, seconds, limit)


async def raw_load(
    url: str,
    clients: int,
    payloads: Payloads,
    seconds: float,
    limit: int = 0,
    *,
    floor: bool = False,
    keep_alive: bool = False,
) -> Load:
    """A minimal HTTP/1.1 client: the default load generator, since httpx's client costs
    more CPU per request than the server on a 2-core machine. Without `keep_alive` every
    request opens its own connection (`Connection: close`), as a Hudi writer does: its
    callbacks are minutes apart, beyond uvicorn's 5 s keep-alive, and new connections
    spread over the server's worker processes."""
    parsed = httpx.URL(url)
    host, port = parsed.host, parsed.port or 80
    close = "" if keep_alive else "Connection: close\r\n"
    head = (
        f"POST {CALLBACK_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\n{close}"
        f"Content-Type: application/json\r\nHUDI-CALLBACK-KEY: {CALLBACK_KEY}\r\n"
    )
    get = f"GET {FLOOR_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\n{close}\r\n".encode()

    def request(body: bytes) -> bytes:
        return get if floor else f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body

    streams = [await asyncio.open_connection(host, port) for _ in range(clients * keep_alive)]

    def sender(index: int) -> Sender:
        async def send(body: bytes) -> int:
            if not keep_alive:
                reader, writer = await asyncio.open_connection(host, port)
                try:
                    return await _exchange(reader, writer, request(body))
                finally:
                    writer.close()
            reader, writer = streams[index]
            try:
                return await _exchange(reader, writer, request(body))
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                writer.close()  # the connection is in an unknown state: open a new one
                streams[index] = await asyncio.open_connection(host, port)
                raise

        return send

    try:
        return await _drive([sender(i) for i in range(clients)], payloads, seconds, limit)
    finally:
        for _, writer in streams:
            writer.close()


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> int:
    """Write one request; read the status line, the headers and the body; the status."""
    writer.write(request)
    status = int((await reader.readuntil(b"\r\n")).split()[1])
    length = 0
    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


LOADERS = {"httpx": httpx_load, "raw": raw_load}


@dataclass(frozen=True)
class ServerConfig:
    """`workers:pool_size[:http[:loop]]` on the command line."""

    workers: int
    pool_size: int
    http: str = "auto"
    loop: str = "auto"

    @classmethod
    def parse(cls, text: str) -> ServerConfig:
        parts = text.strip().split(":")
        return cls(int(parts[0]), int(parts[1]) if len(parts) > 1 else 10, *parts[2:4])

    def __str__(self) -> str:
        return f"{self.workers}:{self.pool_size}:{self.http}:{self.loop}"


def run_config(
    db: BenchDatabase,
    payloads: Payloads,
    args: argparse.Namespace,
    config: ServerConfig,
    *,
    profile_dir: Path | None = None,
    floor: bool = False,
    keep_alive: bool = True,
) -> dict[str, Any]:
    """One server configuration: start it, warm it up, measure, stop it. `floor`: measure
    `GET /healthz` instead (no body, no database)."""
    loader = functools.partial(LOADERS[args.client], keep_alive=keep_alive)
    with api_server(
        db.url,
        workers=config.workers,
        pool_size=config.pool_size,
        http=config.http,
        loop=config.loop,
    ) as server:
        asyncio.run(loader(server.url, args.clients, payloads, args.warmup, floor=floor))
        if not floor:
            payloads.prepare(round(args.duration * args.prepare_rate))
        spy = _start_profile(server, args.duration, profile_dir) if profile_dir else None
        pids = server.pids()  # supervisor first when workers > 1
        groups = {"server": pids, **{f"server_process_{i}": [pid] for i, pid in enumerate(pids)}}
        cpu_before = cpu_sample(groups)
        client_before = resource.getrusage(resource.RUSAGE_SELF)
        load = asyncio.run(
            loader(server.url, args.clients, payloads, args.duration, 0, floor=floor)
        )
        client_after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = cpu_sample(groups).since(cpu_before)
        cpu["client"] = round(
            (client_after.ru_utime + client_after.ru_stime)
            - (client_before.ru_utime + client_before.ru_stime),
            2,
        )
        cpu["client"] = round(cpu["client"] / max(load.seconds, 1e-9), 2)
        profile = _finish_profile(spy, profile_dir) if spy and profile_dir else None
    result: dict[str, Any] = {
        "config": str(config),
        "workers": config.workers,
        "db_pool_size": config.pool_size,
        "http": config.http,
        "loop": config.loop,
        "requests_ok": load.ok,
        "statuses": {str(k): v for k, v in sorted(load.statuses.items())},
        "errors": dict(load.errors),
        "seconds": round(load.seconds, 2),
        "rps": round(load.ok / load.seconds, 1) if load.seconds else 0.0,
        "latency_ms": percentiles(load.latencies),
        "cores_used": cpu,
        # CPU per request depends little on what else runs: a load-independent figure.
        "server_cpu_ms_per_request": round(cpu["server"] * load.seconds / load.ok * 1000, 2)
        if load.ok
        else None,
    }
    if profile is not None:
        result["profile"] = profile
    return result


def _start_profile(server: ApiServer, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    exe = py_spy()
    if exe is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy, or set PY_SPY)")
    out.mkdir(parents=True, exist_ok=True)
    # --gil: only the thread holding the GIL, i.e. where the server spends its CPU.
    command = [exe, "record", "--format", "raw", "--rate", "200", "--subprocesses", "--gil"]
    command += ["--duration", str(int(seconds)), "--pid", str(server.pid)]
    command += ["--output", str(out / "server.collapsed")]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _finish_profile(spy: subprocess.Popen[bytes], out: Path) -> dict[str, Any]:
    _, err = spy.communicate(timeout=120)
    path = out / "server.collapsed"
    if not path.exists():
        return {"error": err.decode(errors="replace")[-2000:]}
    return {
        "collapsed_stacks": str(path),
        "by_layer": profile_breakdown(path, LAYERS),
        **profile_summary(path, top=30),
    }


# Innermost match wins: a sample in `record_commits` below `commit_callback` is
# record_commits.
LAYERS = [
    ("RequestResponseCycle.run_asgi", "uvicorn: ASGI cycle (send, receive)"),
    ("HttpMetricsMiddleware.__call__", "tms.api.http_metrics (HTTP metrics)"),
    ("commit_callback", "tms.api.app.commit_callback (own code)"),
    ("handle_callback", "tms.ingest.callback.handle_callback (own code)"),
    ("_read_body", "request body: read"),
    ("model_validate_json", "request body: pydantic JSON validation"),
    ("summarize", "tms.ingest.commit_action.summarize"),
    ("action_from_stats", "tms.ingest.commit_action.action_from_stats"),
    ("TableProbe", "tms.ingest.probe.TableProbe (storage, in a thread)"),
    ("GroupCommit.submit", "tms.ingest.group_commit (queueing, futures)"),
    ("GroupCommit._flush", "tms.ingest.group_commit (queueing, futures)"),
    ("to_thread", "thread hand-off of a batch"),
    ("write_notifications", "tms.ingest.commit_batch: session, BEGIN, COMMIT"),
    ("_write", "tms.ingest.commit_batch._write (pairing results)"),
    ("lock_tables_by_base_path", "tms.store.commits.lock_tables_by_base_path"),
    ("record_commits", "tms.store.commits.record_commits"),
    ("apply_triggers", "tms.application.triggers.apply_triggers"),
    ("submit_operation", "tms.store.operations.submit_operation"),
    ("Connection.wait", "psycopg: waiting for PostgreSQL"),
]


# The pgbench baseline -------------------------------------------------------------------


def prepare_scratch(db: BenchDatabase) -> None:
    """Scratch copies of `commit` and `tbl` (columns, defaults, indexes; no foreign keys)."""
    with db.connect() as conn:
        conn.execute("CREATE TABLE bench_commit (LIKE commit INCLUDING ALL)")
        conn.execute("CREATE TABLE bench_tbl (LIKE tbl INCLUDING ALL)")
        conn.execute("INSERT INTO bench_tbl SELECT * FROM tbl")
        conn.execute("ANALYZE bench_tbl")


def pgbench(
    db: BenchDatabase, script: str, clients: int, seconds: float, workdir: Path
) -> dict[str, Any]:
    """Run one pgbench script; tps and per-transaction latency percentiles."""
    with db.connect() as conn:
        conn.execute("TRUNCATE bench_commit")
        conn.execute("CHECKPOINT")
    path = workdir / "script.sql"
    path.write_text(script)
    for old in workdir.glob("pgbench_log*"):
        old.unlink()
    command = ["pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", "2"]
    command += ["-T", str(max(1, round(seconds))), "-D", "k=0", "-f", str(path)]
    command += ["--log", f"--log-prefix={workdir}/pgbench_log", db.name]
    env = {**os.environ, **db.pg_env()}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", done.stdout)
    latencies = []
    for log_file in workdir.glob("pgbench_log*"):
        for line in log_file.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                latencies.append(int(parts[2]) / 1e6)
    return {
        "tps": round(float(tps.group(1)), 1) if tps else None,
        "transactions": len(latencies),
        "latency_ms": percentiles(latencies),
    }


def stored_commits(db: BenchDatabase) -> int:
    with db.connect() as conn:
        row = conn.execute("SELECT count(*) FROM commit").fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(__doc__ or "").split("\n\n", 1)[1],
    )
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (32)")
    parser.add_argument("--tables", type=int, default=50, help="registered tables (50)")
    parser.add_argument(
        "--duration", type=float, default=15.0, help="measured seconds per config (15)"
    )
    parser.add_argument("--warmup", type=float, default=3.0, help="unmeasured seconds first (3)")
    parser.add_argument(
        "--configs",
        default="1:4,2:8",
        help="server configurations workers:db_pool_size[:http[:loop]] (uvicorn's --http "
        "and --loop; httptools/uvloop need uvicorn[standard]), comma-separated "
        "(1:4,2:8)",
    )
    parser.add_argument(
        "--client",
        choices=sorted(LOADERS),
        default="raw",
        help="load generator: raw (minimal asyncio HTTP/1.1, ~0.03 cores) or httpx "
        "(AsyncClient; takes 0.5-0.8 of the 2 cores at these rates) (raw)",
    )
    parser.add_argument(
        "--connection-per-request",
        action="store_true",
        help="raw client: a new connection per request in every run, instead of one "
        "keep-alive connection per client",
    )
    parser.add_argument("--pgbench-seconds", type=float, default=15.0, help="per run (15)")
    parser.add_argument(
        "--prepare-rate",
        type=float,
        default=8000.0,
        help="bodies rendered before each measured run, per second of --duration; beyond "
        "them bodies are rendered while sending (8000)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="after the measured runs, run the best config once more under py-spy and "
        "write its stacks to this directory (not used for the figures)",
    )
    parser.add_argument("--keep-db", action="store_true", help="keep the database afterwards")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()

    configs = [ServerConfig.parse(item) for item in args.configs.split(",") if item.strip()]
    keep = not args.connection_per_request
    work = Path(tempfile.mkdtemp(prefix="tms-bench-ingest-"))
    lake = str(work / "lake")  # nothing is written there: tables need no storage here
    with (
        contextlib.ExitStack() as cleanup,
        fresh_database("tms_bench_ingest", keep=args.keep_db) as db,
    ):
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        facts = machine(db)
        log(f"database {db.name}; registering {args.tables} tables")
        tables = register_tables(db, args.tables, lake)
        prepare_scratch(db)
        payloads = Payloads(tables)
        insert = INSERT_SCRIPT.format(tables=args.tables)
        full = FULL_SCRIPT.format(tables=args.tables, base=f"{lake}/")

        log(f"pgbench ceiling, {args.clients} clients, {args.pgbench_seconds:g}s")
        before = pgbench(db, insert, args.clients, args.pgbench_seconds, work)
        log(f"  {before['tps']} tps")
        runs = []
        for config in configs:
            log(f"service: workers:pool:http:loop = {config}, {args.client} client")
            run = run_config(db, payloads, args, config, keep_alive=keep)
            log(
                f"  {run['rps']} rps, p50 {run['latency_ms'].get('p50')} ms, "
                f"p99 {run['latency_ms'].get('p99')} ms, cores {run['cores_used']}"
            )
            runs.append(run)
        best = max(runs, key=lambda r: r["rps"])
        log(f"HTTP floor: GET /healthz on {best['config']}")
        # Its own (unused) bodies, so the durability check counts callbacks only.
        floor = ServerConfig.parse(best["config"])
        healthz = run_config(db, Payloads(tables), args, floor, floor=True, keep_alive=keep)
        log(f"  {healthz['rps']} rps, p99 {healthz['latency_ms'].get('p99')} ms")
        log(f"context: a new connection per callback on {best['config']}")
        reconnecting = run_config(db, payloads, args, floor, keep_alive=False)
        log(
            f"  {reconnecting['rps']} rps, p50 {reconnecting['latency_ms'].get('p50')} ms, "
            f"p99 {reconnecting['latency_ms'].get('p99')} ms"
        )
        log("pgbench ceiling again")
        after = pgbench(db, insert, args.clients, args.pgbench_seconds, work)
        log(f"  {after['tps']} tps")
        log("pgbench: the whole database work of a notification")
        whole = pgbench(db, full, args.clients, args.pgbench_seconds, work)
        log(f"  {whole['tps']} tps")

        profile = None
        if args.profile is not None:
            log(f"profiling {best['config']} with py-spy")
            config = ServerConfig.parse(best["config"])
            profile = run_config(
                db, payloads, args, config, profile_dir=args.profile, keep_alive=keep
            )
        stored = stored_commits(db)

    ceiling = (before["tps"] + after["tps"]) / 2 if before["tps"] and after["tps"] else None
    share = ratio(best["rps"], ceiling or 0.0)
    figures: dict[str, Any] = {
        "benchmark": "ingest",
        "machine": facts,
        "clients": args.clients,
        "tables": args.tables,
        "client": args.client,
        "connection_per_request": not keep,
        "duration_s": args.duration,
        "baseline_pgbench_insert": {"before": before, "after": after, "ceiling_tps": ceiling},
        "context_pgbench_notification_sql": whole,
        "context_http_floor_healthz": healthz,
        "context_connection_per_request": reconnecting,
        "runs": runs,
        "best": {
            "config": best["config"],
            "rps": best["rps"],
            "p50_ms": best["latency_ms"].get("p50"),
            "p99_ms": best["latency_ms"].get("p99"),
            "server_cpu_ms_per_request": best["server_cpu_ms_per_request"],
            "ratio_to_ceiling": share,
            "ratio_to_notification_sql": ratio(best["rps"], whole["tps"] or 0.0),
            "ratio_to_http_floor": ratio(best["rps"], healthz["rps"]),
        },
        "goals": {
            "ratio_to_ceiling": goal(share, 0.30, at_least=True),
            "p99_ms": goal(best["latency_ms"].get("p99"), 50.0),
        },
        "durability_check": {
            "notifications_sent": payloads.count,
            "acknowledged_2xx": payloads.acked,
            "commit_rows_stored": stored,
            "every_2xx_stored": stored >= payloads.acked,
            "non_2xx_or_errors": sum(
                sum(n for s, n in r["statuses"].items() if not s.startswith("2"))
                + sum(r["errors"].values())
                for r in [*runs, reconnecting]
            ),
        },
    }
    if profile is not None:
        figures["profile_run"] = profile
    emit(figures, args.json_out)


if __name__ == "__main__":
    main()
