"""Shared helpers of the service benchmarks (ingest, scheduling, scale).

A fresh migrated database per run, the API server in its own process (so the load
generator and the server never share a GIL), latency percentiles, CPU accounting from
`/proc`, machine facts, py-spy profiles and the JSON report. Benchmarks print figures and
ratios to baselines measured in the same run; they never assert on time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

if TYPE_CHECKING:
    from fastapi import FastAPI

    from tms.config import Settings
    from tms.engines import LaunchSpec

__all__ = [
    "ROOT",
    "ApiServer",
    "BenchDatabase",
    "CpuSample",
    "RecordedJob",
    "admin_url",
    "api_server",
    "bench_settings",
    "cpu_sample",
    "emit",
    "fresh_database",
    "goal",
    "log",
    "machine",
    "percentiles",
    "postgres_server",
    "profile_breakdown",
    "profile_summary",
    "py_spy",
    "ratio",
    "server_app",
]

ROOT = Path(__file__).resolve().parents[1]
ADMIN_URL_ENV = "TMS_BENCH_DATABASE_URL"
LOCAL_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def log(message: str) -> None:
    """Progress goes to stderr, so stdout carries only the JSON report."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# Databases ------------------------------------------------------------------------------


def admin_url() -> str:
    """`TMS_BENCH_DATABASE_URL` (any database on the server; used to create others), else
    the local server on 127.0.0.1:5432 as user postgres."""
    url = os.environ.get(ADMIN_URL_ENV, "").strip() or LOCAL_ADMIN_URL
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@dataclass(frozen=True)
class BenchDatabase:
    """A database created for one benchmark run."""

    name: str
    url: str  # SQLAlchemy URL (postgresql+psycopg://)

    @property
    def libpq_url(self) -> str:
        return _libpq(self.url)

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        return psycopg.connect(self.libpq_url, autocommit=autocommit)

    def pg_env(self) -> dict[str, str]:
        """libpq environment variables for command-line tools (pgbench, psql)."""
        url = make_url(self.url)
        env = {
            "PGHOST": url.host or "127.0.0.1",
            "PGPORT": str(url.port or 5432),
            "PGUSER": url.username or "postgres",
            "PGDATABASE": self.name,
        }
        if url.password:
            env["PGPASSWORD"] = str(url.password)
        return env

    def server_version(self) -> str:
        with self.connect() as conn:
            row = conn.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "?"


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """The admin URL of the server the run's databases go on: `TMS_BENCH_DATABASE_URL` when
    set, else an embedded PostgreSQL started for the run (and named there for
    `fresh_database`), stopped and deleted at exit."""
    if os.environ.get(ADMIN_URL_ENV):
        yield admin_url()
        return
    from tms.embedded_postgres import start_embedded

    with tempfile.TemporaryDirectory(prefix="tms-pg-") as folder:
        server = start_embedded(Path(folder), cleanup="delete")
        try:
            os.environ[ADMIN_URL_ENV] = server.url("postgres")
            yield admin_url()
        finally:
            os.environ.pop(ADMIN_URL_ENV, None)
            server.stop()


@contextlib.contextmanager
def fresh_database(prefix: str, *, keep: bool = False) -> Iterator[BenchDatabase]:
    """Create `<prefix>_<pid>_<hex>`, apply the migrations, drop it afterwards (unless
    `keep`, for inspecting it)."""
    from tms.store import upgrade

    admin = admin_url()
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(_libpq(admin), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db = BenchDatabase(name, make_url(admin).set(database=name).render_as_string(False))
    try:
        upgrade(db.url)
        yield db
    finally:
        if keep:
            log(f"kept database {name}")
        else:
            with psycopg.connect(_libpq(admin), autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


def bench_settings(database_url: str, data_dir: Path, **overrides: Any) -> Settings:
    """Settings that ignore the caller's environment and `conf/tms.toml`. No pulls unless
    asked: a benchmark measures one piece of work, not the timelines read beside it."""
    from tms.config import load_settings

    values: dict[str, Any] = {"pull_listings_per_minute": 0, **overrides}
    return load_settings(
        config_file=False, environ={}, database_url=database_url, data_dir=data_dir, **values
    )


# The API server -------------------------------------------------------------------------


def server_app() -> FastAPI:
    """uvicorn `--factory` target: the API as `tms serve` builds it, without the scheduler,
    configured from the `TMS_*` variables `api_server` sets."""
    from tms.api.app import create_app
    from tms.config import load_settings
    from tms.store import make_engine, make_session_factory

    settings = load_settings(config_file=False)
    assert settings.database_url is not None
    engine = make_engine(settings.database_url, pool_size=settings.db_pool_size)
    return create_app(settings, make_session_factory(engine))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ApiServer:
    """A running `uvicorn` process serving `server_app` on loopback."""

    url: str
    process: subprocess.Popen[bytes]
    workers: int
    pool_size: int
    log_path: Path
    http: str = "auto"
    loop: str = "auto"

    @property
    def pid(self) -> int:
        return self.process.pid

    def pids(self) -> list[int]:
        """The server and its worker processes."""
        return [self.pid, *_descendants(self.pid)]


@contextlib.contextmanager
def api_server(
    database_url: str,
    *,
    workers: int = 1,
    pool_size: int = 10,
    http: str = "auto",
    loop: str = "auto",
    settings: Mapping[str, str] | None = None,
    startup_timeout: float = 60.0,
) -> Iterator[ApiServer]:
    """Start `python -m uvicorn --factory bench.common:server_app` on a free loopback port
    (access log off, as a production deployment behind a proxy would run it) and stop it
    with SIGTERM on exit. `http`/`loop` are uvicorn's (`httptools`, `uvloop` need
    `uvicorn[standard]`); `settings` are extra `TMS_*` variables."""
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="tms-bench-server-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
    env |= {
        "TMS_DATABASE_URL": database_url,
        "TMS_DB_POOL_SIZE": str(pool_size),
        "TMS_DATA_DIR": str(data_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        **(settings or {}),
    }
    log_path = data_dir / "server.log"
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "bench.common:server_app",
        "--app-dir",
        str(ROOT),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--http",
        http,
        "--loop",
        loop,
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    with log_path.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = ApiServer(
        f"http://127.0.0.1:{port}", process, workers, pool_size, log_path, http, loop
    )
    try:
        _wait_ready(server, startup_timeout)
        yield server
    finally:
        _stop(process)
        shutil.rmtree(data_dir, ignore_errors=True)


def _wait_ready(server: ApiServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    ready = 0
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(
                f"API server exited with {server.process.returncode}:\n"
                + server.log_path.read_text(errors="replace")[-4000:]
            )
        try:
            if httpx.get(f"{server.url}/readyz", timeout=2).status_code == 200:
                ready += 1
                # Every worker imports the app on its own: let all of them come up.
                if ready >= 2 * server.workers:
                    return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"API server not ready after {timeout}s; log: {server.log_path}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def _descendants(pid: int) -> list[int]:
    """Children, grandchildren… of `pid` from `/proc` (empty where there is no `/proc`)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = entry.read_text().rsplit(")", 1)[1].split()
            parents[int(entry.parent.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


# Scheduler benchmarks -------------------------------------------------------------------


class RecordedJob:
    """What a recording engine returns for a launch: no process is started; the job runs
    until the benchmark sets `code` (or the scheduler kills it)."""

    def __init__(self, spec: LaunchSpec) -> None:
        self.spec = spec
        self.code: int | None = None

    @property
    def pid(self) -> int | None:
        return None

    @property
    def log_path(self) -> Path:
        return self.spec.log_path

    def poll(self) -> int | None:
        return self.code

    def kill(self) -> None:
        if self.code is None:
            self.code = -9


# CPU accounting -------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds used so far by process groups, and by the whole machine."""

    at: float
    groups: dict[str, float]
    postgres: dict[int, float]
    machine_busy: float
    machine_total: float

    def since(self, earlier: CpuSample) -> dict[str, float]:
        """Cores each group used on average between the two samples, plus `machine_busy`
        (cores busy machine-wide, including other users of the machine)."""
        wall = max(self.at - earlier.at, 1e-9)
        used = {
            name: round((seconds - earlier.groups.get(name, 0.0)) / wall, 2)
            for name, seconds in self.groups.items()
        }
        # Backends come and go: count only what each one used between the samples.
        postgres = sum(
            seconds - earlier.postgres.get(pid, 0.0) for pid, seconds in self.postgres.items()
        )
        used["postgres"] = round(postgres / wall, 2)
        total = self.machine_total - earlier.machine_total
        cores = os.cpu_count() or 1
        busy = (self.machine_busy - earlier.machine_busy) / total * cores if total else 0.0
        used["machine_busy"] = round(busy, 2)
        return used


def _process_cpu(pid: int) -> float:
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime
    return 0.0


def _postgres_cpu() -> dict[int, float]:
    """Every `postgres` process by pid (backends of all databases: other users included)."""
    found: dict[int, float] = {}
    for entry in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if entry.read_text().strip() == "postgres":
                found[int(entry.parent.name)] = _process_cpu(int(entry.parent.name))
    return found


def cpu_sample(groups: Mapping[str, Sequence[int]]) -> CpuSample:
    """Sample CPU time of the named process groups (pids), of every PostgreSQL process
    (`postgres`), and of the machine (`/proc/stat`)."""
    values = {name: sum(_process_cpu(pid) for pid in pids) for name, pids in groups.items()}
    busy = total = 0.0
    with contextlib.suppress(OSError, ValueError):
        line = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        ticks = [float(x) for x in line]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0.0)
        total = sum(ticks[:8])
        busy = total - idle
    return CpuSample(time.monotonic(), values, _postgres_cpu(), busy, total)


# Statistics and report ------------------------------------------------------------------


def percentiles(
    seconds: Sequence[float], points: Sequence[float] = (50, 95, 99)
) -> dict[str, float]:
    """`n`, `pNN` for each point, `mean` and `max`, in milliseconds (linear interpolation)."""
    values = sorted(seconds)
    out: dict[str, float] = {"n": float(len(values))}
    if not values:
        return out
    for point in points:
        rank = (len(values) - 1) * point / 100
        low = int(rank)
        high = min(low + 1, len(values) - 1)
        value = values[low] + (values[high] - values[low]) * (rank - low)
        out[f"p{point:g}"] = round(value * 1000, 2)
    out["mean"] = round(sum(values) / len(values) * 1000, 2)
    out["max"] = round(values[-1] * 1000, 2)
    out["n"] = len(values)
    return out


def ratio(ours: float, baseline: float) -> float | None:
    return round(ours / baseline, 3) if baseline else None


def goal(value: float | None, limit: float, *, at_least: bool = False) -> dict[str, Any]:
    """`{"value", "goal", "met"}` for the report."""
    if value is None:
        return {"value": None, "goal": limit, "met": False}
    met = value >= limit if at_least else value <= limit
    return {"value": value, "goal": f"{'>=' if at_least else '<='} {limit}", "met": met}


def machine(db: BenchDatabase | None = None) -> dict[str, Any]:
    """Where the figures come from: OS, CPU, cores, memory, load, PostgreSQL version."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_gib: float | None = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
    facts: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": memory_gib,
        "load_average_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }
    if db is not None:
        facts["postgresql"] = db.server_version()
        with db.connect() as conn:
            for name in ("synchronous_commit", "max_connections", "shared_buffers"):
                row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
                facts[f"pg_{name}"] = row[0] if row else None
    return facts


def emit(figures: Mapping[str, Any], json_out: Path | None = None) -> None:
    """Print the report as one JSON block (and write it to `json_out` if given)."""
    text = json.dumps(figures, indent=2, default=str)
    print(text, flush=True)
    if json_out is not None:
        json_out.write_text(text + "\n")


# Profiling ------------------------------------------------------------------------------


def py_spy() -> str | None:
    """The py-spy executable: `$PY_SPY`, else on `PATH` (`pip install py-spy`)."""
    return os.environ.get("PY_SPY") or shutil.which("py-spy")


@dataclass
class Profile:
    """Collapsed stacks from `py-spy record --format raw`, summarised per function."""

    samples: int = 0
    inclusive: Counter[str] = field(default_factory=Counter)
    own: Counter[str] = field(default_factory=Counter)


def profile_summary(path: Path, *, top: int = 25, only: str = "") -> dict[str, Any]:
    """The functions with most samples, inclusive (on the stack) and own (top of stack), as
    percentages of all samples. `only` keeps stacks containing that text (a thread name)."""
    profile = Profile()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit() or (only and only not in stack):
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";") if f]
        profile.samples += count
        for name in set(frames):
            profile.inclusive[name] += count
        if frames:
            profile.own[frames[-1]] += count
    total = max(profile.samples, 1)

    def share(counter: Counter[str]) -> list[str]:
        return [f"{100 * n / total:5.1f}%  {name}" for name, n in counter.most_common(top)]

    return {
        "samples": profile.samples,
        "inclusive": share(profile.inclusive),
        "own": share(profile.own),
    }


def profile_breakdown(path: Path, markers: Sequence[tuple[str, str]]) -> list[str]:
    """Each sample goes to the innermost `(frame prefix, label)` marker on its stack, else
    to `other`: a flat split of the time by layer, as percentages of all samples."""
    shares: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        total += int(count_text)
        label = "other (event loop, uvicorn protocol, asyncio)"
        for frame in stack.split(";"):
            for prefix, name in markers:
                if frame.startswith(prefix):
                    label = name
        shares[label] += int(count_text)
    return [f"{100 * n / max(total, 1):5.1f}%  {name}" for name, n in shares.most_common()]


def _frame(frame: str) -> str:
    """`func (path/to/module.py:123)` → `func (module.py)`: one entry per function."""
    name, _, where = frame.partition(" (")
    file = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("/site-packages/", "/src/", "/lib/python"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{name} ({file})" if file else name


def own_peak_rss() -> int:
    """This process's peak resident memory in bytes (the kernel's VmHWM)."""
    return next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmHWM:")
    )
