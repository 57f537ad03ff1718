"""Both executors of a table service on the same plan, in one Spark session, beside the raw
Parquet rewrite of the same rows: what `compaction.py` and `clustering.py` share.

Each executor runs the plan on its own copy of the table (`Prepare` says how a copy gets the
plan: copied after planning, or planned on the copy at one instant time), so tms's own tasks
and Hudi's procedure run the same plan on identical tables. The session carries Hudi's
bundle (Kryo, Hudi's SQL extension), which tms's own tasks run under too. Peak memory is
sampled during each execution: the driver (this Python process and the JVM it started,
whose local executors run the tasks; resident sizes) and, apart, the Python workers the JVM
forks for tms's tasks and its other child processes (proportional set sizes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

from bench.common import goal, log, profile_summary, py_spy
from tms.hudi.table import HudiTable
from tms.services.registry import table_service
from tms.spark_runtime import get_spark
from tms.spark_runtime.hudi_bundle import hudi_jars, hudi_spark_conf

__all__ = [
    "EXECUTORS",
    "BenchTable",
    "MemoryPeak",
    "add_arguments",
    "base_files",
    "baseline",
    "bench_tables",
    "build_tables",
    "compare",
    "hudi_session",
    "measure",
    "parse_executors",
]

EXECUTORS = ("native", "hudi")
HUDI_THROUGHPUT_GOAL = 1.5
"""native rows/s at least this many times Hudi's."""
BASELINE_GOAL = 0.9
"""native rows/s at least this share of the raw Parquet rewrite's."""
SAMPLE_SECONDS = 0.1
"""How often the driver's resident memory is read (cheap: `/proc/<pid>/statm`)."""
CHILDREN_EVERY = 10
"""The JVM's children are listed and their proportional sizes read (`smaps_rollup`, costly)
once every this many samples, so that sampling takes little of the CPU it measures."""

_Built = TypeVar("_Built")


def parse_executors(text: str) -> list[str]:
    """`native,hudi` → the executors to run, in that order; ValueError for an unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(names) - set(EXECUTORS))
    if unknown or not names:
        raise ValueError(f"--executors takes {', '.join(EXECUTORS)}; got {text!r}")
    return names


@dataclass(frozen=True)
class BenchTable:
    """One table of a run: its name in the figures, version, and whether it has a metadata
    table (`files` and `record_index`)."""

    name: str
    version: int
    metadata_table: bool


def add_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """The options both benchmarks take: which tables, which executors, where."""
    parser.add_argument("--table-versions", default="6,9")
    parser.add_argument(
        "--metadata-versions",
        default="6,9",
        help=f"table versions {verb} once more with a metadata table; '' for none",
    )
    parser.add_argument("--executors", default="native,hudi", help="native, hudi or both")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each executor per table; the fastest counts"
    )
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument(
        "--profile", type=Path, default=None, help="py-spy records each native run into DIR"
    )


def bench_tables(args: argparse.Namespace) -> list[BenchTable]:
    """The tables `--table-versions` and `--metadata-versions` ask for, in that order."""
    versions = [int(v) for v in args.table_versions.split(",") if v]
    with_metadata = [int(v) for v in args.metadata_versions.split(",") if v]
    tables = [BenchTable(f"v{v}", v, False) for v in versions]
    return tables + [BenchTable(f"v{v}_metadata_table", v, True) for v in with_metadata]


def build_tables(
    work: Path, tables: Sequence[BenchTable], build: Callable[[str, BenchTable], _Built]
) -> dict[str, tuple[str, _Built]]:
    """Each table built afresh under `work` by `build`: its location and what `build` said."""
    built = {}
    for table in tables:
        base = str(work / f"bench_trips_{table.name}")
        shutil.rmtree(base, ignore_errors=True)
        log(f"building {table.name}")
        built[table.name] = (base, build(base, table))
    return built


def hudi_session(master: str, app_name: str, executors: Sequence[str]) -> Any:
    """A SparkSession with Hudi's bundle when the hudi executor runs (tms's own tasks run
    under the same Kryo configs); SystemExit when the bundle is not in the Maven cache."""
    conf: dict[str, str] = {}
    if "hudi" in executors:
        jars = hudi_jars(os.environ.get("TMS_HUDI_JARS"))
        if not jars:
            raise SystemExit("Hudi's bundle is missing: python -m tms.spark_runtime.hudi_bundle")
        conf = hudi_spark_conf(jars)
    spark = get_spark(master, app_name=app_name, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")  # Hudi warns per file group of deprecated keys
    return spark


def _jvm_pid(spark: Any) -> int | None:
    try:
        return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # no JVM to ask
        return None


def _rss_mb(process: psutil.Process) -> float:
    try:
        return float(process.memory_info().rss) / 2**20
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0


def _pss_mb(process: psutil.Process) -> float:
    """Proportional set size: forked Python workers share the daemon's pages, which a sum of
    resident sizes would count once per worker."""
    try:
        return float(process.memory_full_info().pss) / 2**20
    except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
        return _rss_mb(process)


def _name(process: psutil.Process) -> str:
    try:
        return str(process.name())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"


@dataclass
class MemoryPeak:
    """Samples memory while open: the driver (this process and the JVM) every
    `SAMPLE_SECONDS`, the JVM's Python workers and its other children less often; peaks and
    the driver's memory at the start."""

    spark: Any
    driver_mb: float = 0.0
    workers_mb: float = 0.0
    worker_mb: float = 0.0
    """The largest one Python worker took (`workers_mb`: all of them at once)."""
    others_mb: float = 0.0
    others: set[str] = field(default_factory=set)
    start_driver_mb: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> MemoryPeak:
        own = psutil.Process()
        jvm_pid = _jvm_pid(self.spark)
        jvm = psutil.Process(jvm_pid) if jvm_pid else None
        self.start_driver_mb = self._sample(own, jvm)
        self._thread = threading.Thread(target=self._run, args=(own, jvm), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self, own: psutil.Process, jvm: psutil.Process | None) -> None:
        count = 0
        while not self._stop.wait(SAMPLE_SECONDS):
            count += 1
            self._sample(own, jvm, children=count % CHILDREN_EVERY == 0)

    def _sample(
        self, own: psutil.Process, jvm: psutil.Process | None, *, children: bool = True
    ) -> float:
        driver = _rss_mb(own) + (_rss_mb(jvm) if jvm else 0.0)
        self.driver_mb = max(self.driver_mb, driver)
        workers = others = 0.0
        if jvm is not None and children:
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in jvm.children(recursive=True):
                    name = _name(child)
                    if name.startswith("python"):
                        one = _pss_mb(child)
                        workers += one
                        self.worker_mb = max(self.worker_mb, one)
                    else:
                        others += _pss_mb(child)
                        self.others.add(name)
        self.workers_mb = max(self.workers_mb, workers)
        self.others_mb = max(self.others_mb, others)
        return driver


def baseline(spark: Any, files: Sequence[str], out: str, runs: int = 2) -> dict[str, Any]:
    """Spark reads `files` (the rows the service rewrites) and writes them back as Parquet;
    the better of `runs`, so the JVM's warm-up does not count."""
    best: tuple[float, int] | None = None
    for run in range(runs):
        started = time.perf_counter()
        frame = spark.read.parquet(*files)
        frame.write.mode("overwrite").parquet(f"{out}_{run}")
        elapsed = time.perf_counter() - started
        if best is None or elapsed < best[0]:
            best = (elapsed, frame.count())
        shutil.rmtree(f"{out}_{run}", ignore_errors=True)
    assert best is not None
    seconds, rows = best
    return {"rows": rows, "seconds": round(seconds, 2), "rows_per_second": round(rows / seconds)}


PROFILE_RATE = 100
"""py-spy samples per second of each process."""


@contextlib.contextmanager
def profiled(out: Path | None) -> Iterator[dict[str, Any]]:
    """While open, `py-spy record` samples this process and its children (the JVM's Python
    workers run tms's tasks) into `out`; the summary is put in the yielded dict on exit."""
    summary: dict[str, Any] = {}
    if out is None:
        yield summary
        return
    exe = py_spy()
    if exe is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy, or set PY_SPY)")
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [exe, "record", "--format", "raw", "--rate", str(PROFILE_RATE), "--subprocesses"]
    command += ["--pid", str(os.getpid()), "--output", str(out)]
    spy = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # py-spy attaches before the work starts
    try:
        yield summary
    finally:
        spy.send_signal(signal.SIGINT)
        _, err = spy.communicate(timeout=120)
        if out.exists():
            summary.update(profile_summary(out, top=30), collapsed_stacks=str(out))
            summary["sampled_seconds"] = round(summary["samples"] / PROFILE_RATE, 1)
        else:
            summary["error"] = err.decode(errors="replace")[-2000:]


def run_one(
    spark: Any,
    action: str,
    base: str,
    instant: str,
    executor: str,
    profile: Path | None = None,
) -> dict[str, Any]:
    """One execution of the plan at `instant` by `executor`; its figures, or the error.
    `profile`: where py-spy's samples of the execution go (the native executor's only: Hudi's
    code runs in the JVM)."""
    table = HudiTable.open(base)
    service = table_service(action)
    log(f"{action} {Path(base).name}: {executor} executor runs {instant}")
    spied = profile if executor == "native" else None
    with MemoryPeak(spark) as memory, profiled(spied) as summary:
        started = time.perf_counter()
        try:
            result = service.execute(spark, table, instant, 60.0, executor=executor)
        except Exception as exc:  # a table Hudi's code (or ours) cannot serve: a line, not a crash
            figures: dict[str, Any] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            figures["traceback_tail"] = traceback.format_exc().splitlines()[-6:]
            return figures
        seconds = time.perf_counter() - started
    return {
        "state": result.state,
        "seconds": round(seconds, 2),
        "rows": result.records_written,
        "rows_per_second": round(result.records_written / seconds) if seconds else None,
        "file_groups": result.file_groups,
        "files_written": result.files_written,
        "bytes_written": result.bytes_written,
        "log_records_merged": result.log_records_compacted,
        "peak_driver_mb": round(memory.driver_mb),
        "driver_mb_at_start": round(memory.start_driver_mb),
        "peak_python_workers_mb": round(memory.workers_mb),
        "peak_python_worker_mb": round(memory.worker_mb),
        "peak_other_jvm_children_mb": round(memory.others_mb),
        "other_jvm_children": sorted(memory.others),
        **({"profile": summary} if summary else {}),
    }


def _best(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The fastest of an executor's runs, with every run's seconds and the highest peaks;
    the first error when a run failed."""
    failed = [run for run in runs if "error" in run]
    if failed:
        return failed[0]
    best = dict(min(runs, key=lambda run: run["seconds"]))
    best["runs_seconds"] = [run["seconds"] for run in runs]
    for peak in (
        "peak_driver_mb",
        "peak_python_workers_mb",
        "peak_python_worker_mb",
        "peak_other_jvm_children_mb",
    ):
        best[peak] = max(run[peak] for run in runs)
    return best


def compare(
    spark: Any,
    action: str,
    planned: str,
    instant: str,
    executors: Sequence[str],
    base_line: dict[str, Any],
    *,
    repeat: int = 1,
    native_first: bool = True,
    copy: Callable[[str, str], Any] = shutil.copytree,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Run the plan at `instant` of the table at `planned` `repeat` times with each executor,
    each time on a fresh copy of the planned table, the order alternating (`native_first`
    picks the first); the fastest run's figures, ratios and goals."""
    orders = []
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in executors}
    for attempt in range(repeat):
        order = list(executors) if native_first == (attempt % 2 == 0) else executors[::-1]
        orders.append(list(order))
        for executor in order:
            target = f"{planned}_{executor}"
            shutil.rmtree(target, ignore_errors=True)
            copy(planned, target)
            spied = profile / f"{Path(planned).name}_{attempt}.txt" if profile else None
            runs[executor].append(run_one(spark, action, target, instant, executor, spied))
            shutil.rmtree(target, ignore_errors=True)
            if "error" in runs[executor][-1]:
                break
    best = {name: _best(runs[name]) for name in executors}
    line: dict[str, Any] = {"orders": orders, **best}
    baseline_rate = base_line["rows_per_second"]
    for name in executors:
        rate = best[name].get("rows_per_second")
        if rate:
            best[name]["ratio_to_baseline"] = round(rate / baseline_rate, 3)
    native = best.get("native", {}).get("rows_per_second")
    hudi = best.get("hudi", {}).get("rows_per_second")
    if native and hudi:
        line["ratio_native_to_hudi"] = round(native / hudi, 3)
    goals: dict[str, Any] = {}
    if "native" in best:
        goals["native_vs_baseline"] = goal(
            best["native"].get("ratio_to_baseline"), BASELINE_GOAL, at_least=True
        )
    if "native" in best and "hudi" in best:
        goals["native_vs_hudi"] = goal(
            line.get("ratio_native_to_hudi"), HUDI_THROUGHPUT_GOAL, at_least=True
        )
    line["goals"] = goals
    return line


Prepare = Callable[[str], tuple[str, Callable[[str, str], Any]]]
"""Plans the table at a location: the plan's instant, and how to copy the table for an
executor so the copy carries that plan."""


def measure(
    spark: Any,
    action: str,
    warm: str,
    bases: dict[str, str],
    executors: Sequence[str],
    prepare: Prepare,
    repeat: int = 1,
    profile: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Each table at `bases` (by name) planned by `prepare`, its baseline, and its plan run by
    each executor `repeat` times (the fastest counts), the order alternating; first once on
    the small table at `warm`, not reported, so that no measurement pays for the session's
    warm-up. The baseline is the best of as many runs (at least two)."""
    out = str(Path(warm).parent / "baseline_out")
    instant, copy = prepare(warm)
    compare(
        spark, action, warm, instant, executors, baseline(spark, base_files(warm), out), copy=copy
    )
    lines = {}
    for index, (name, base) in enumerate(bases.items()):
        files = base_files(base)
        instant, copy = prepare(base)
        base_line = baseline(spark, files, out, runs=max(2, repeat))
        line = compare(
            spark,
            action,
            base,
            instant,
            executors,
            base_line,
            repeat=repeat,
            native_first=index % 2 == 0,
            copy=copy,
            profile=profile,
        )
        lines[name] = {
            "input_files": len(files),
            "input_bytes": sum(Path(f).stat().st_size for f in files),
            "baseline": base_line,
            **line,
        }
        log(f"{name}: {json.dumps(lines[name])}")
    return lines


def base_files(base: str) -> list[str]:
    """The table's data Parquet files (not the metadata table's, not `.hoodie`'s)."""
    return [str(p) for p in Path(base).rglob("*.parquet") if ".hoodie" not in p.parts]
