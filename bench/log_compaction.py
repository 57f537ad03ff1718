"""Log compaction against full compaction on the compaction bench's tables: what merging a
file slice's log blocks into one new log file costs next to rewriting the slice.

For each table of `--table-versions` (and `--metadata-versions` once more with a metadata
table), builds the merge-on-read table `compaction.py` builds (`--rows`, `--update-fraction`
of them updated across `--delta-commits` delta commits: that many log blocks per file slice
the updates touch), then, each on its own copy, in one Spark session carrying Hudi's bundle:
tms plans a log compaction of the slices with at least `--log-blocks-threshold` blocks, run
by tms's own executor and by Hudi's code; tms plans a compaction and its own executor runs
it; Hudi's code runs the same compaction plan. Prints each one's wall time, log records
merged per second, rows and bytes written, peak memory, and the ratios of each log
compaction to the other and to each compaction (a table tms's own log compaction declines,
one whose metadata table has partitions beyond `files`, prints its reason instead). The best
of `--repeat` runs counts; a warm-up table runs first, unreported.

    .venv/bin/python bench/log_compaction.py [--rows N] [--table-versions 6,9]
        [--metadata-versions 9] [--log-blocks-threshold 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit, log, machine
from bench.compaction import WARM_UP_ROWS, build_table
from bench.executors import bench_tables, build_tables, hudi_session, run_one
from tms.hudi.actions import COMPACTION, LOG_COMPACTION
from tms.hudi.table import HudiTable
from tms.services.registry import table_service

RUNS: tuple[tuple[str, str, str], ...] = (
    ("log_compaction_native", LOG_COMPACTION, "native"),
    ("log_compaction_hudi", LOG_COMPACTION, "hudi"),
    ("compaction_native", COMPACTION, "native"),
    ("compaction_hudi", COMPACTION, "hudi"),
)
"""(name in the figures, action, executor) of each run on a copy of a table."""


def planned_copy(base: str, name: str, action: str, params: dict[str, Any]) -> tuple[str, str]:
    """A copy of the table at `base` with a plan of `action` on it: its location and instant."""
    target = f"{base}_{name}"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    instant = table_service(action).schedule(HudiTable.open(target), params)
    assert instant is not None, f"nothing to plan for {action} on {target}"
    return target, instant


def best_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    failed = [run for run in runs if "error" in run]
    if failed:
        return failed[0]
    best = dict(min(runs, key=lambda run: run["seconds"]))
    best["runs_seconds"] = [run["seconds"] for run in runs]
    merged = best.get("log_records_merged") or 0
    best["log_records_per_second"] = round(merged / best["seconds"]) if best["seconds"] else None
    return best


def measure_table(
    spark: Any, base: str, threshold: int, repeat: int, order: Callable[[int], list[int]]
) -> dict[str, Any]:
    """Each run of `RUNS` `repeat` times on fresh planned copies of the table at `base`, the
    order turning from repeat to repeat; the best of each, and the ratios."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in RUNS}
    for attempt in range(repeat):
        for index in order(attempt):
            name, action, executor = RUNS[index]
            params = {"log_blocks_threshold": threshold} if action == LOG_COMPACTION else {}
            target, instant = planned_copy(base, name, action, params)
            runs[name].append(run_one(spark, action, target, instant, executor))
            shutil.rmtree(target, ignore_errors=True)
    line = {name: best_of(found) for name, found in runs.items()}
    pairs = [
        (lc, other)
        for lc in ("log_compaction_native", "log_compaction_hudi")
        for other in ("log_compaction_hudi", "compaction_native", "compaction_hudi")
        if lc != other
    ]
    for lc, other in pairs:
        if "error" in line[other] or "error" in line[lc]:
            continue
        line[f"seconds_{lc}_to_{other}"] = round(line[lc]["seconds"] / line[other]["seconds"], 3)
        line[f"bytes_{lc}_to_{other}"] = round(
            line[lc]["bytes_written"] / line[other]["bytes_written"], 4
        )
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--update-fraction", type=float, default=0.2)
    parser.add_argument("--delta-commits", type=int, default=4)
    parser.add_argument("--file-rows", type=int, default=125_000)
    parser.add_argument("--log-blocks-threshold", type=int, default=2)
    parser.add_argument("--table-versions", default="6,9")
    parser.add_argument("--metadata-versions", default="9")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    tables = bench_tables(args)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="tms-bench-"))
    built = build_tables(
        work,
        tables,
        lambda base, t: build_table(
            base,
            args.rows,
            args.update_fraction,
            args.delta_commits,
            t.version,
            t.metadata_table,
            args.file_rows,
        ),
    )
    spark = hudi_session(args.master, "tms-bench-log-compaction", ["native", "hudi"])
    warm = str(work / "bench_trips_warm_up")
    shutil.rmtree(warm, ignore_errors=True)
    build_table(warm, WARM_UP_ROWS, args.update_fraction, args.delta_commits, 9)
    measure_table(spark, warm, args.log_blocks_threshold, 1, lambda _: list(range(len(RUNS))))
    per_table = {}
    for number, (name, (base, _)) in enumerate(built.items()):
        turn = number

        def order(attempt: int, turn: int = turn) -> list[int]:
            first = (turn + attempt) % len(RUNS)
            return [(first + i) % len(RUNS) for i in range(len(RUNS))]

        per_table[name] = measure_table(spark, base, args.log_blocks_threshold, args.repeat, order)
        log(f"{name}: {per_table[name]}")
    figures = {
        "machine": machine(),
        "master": args.master,
        "rows": args.rows,
        "update_fraction": args.update_fraction,
        "delta_commits": args.delta_commits,
        "file_rows": args.file_rows,
        "log_blocks_threshold": args.log_blocks_threshold,
        "tables": per_table,
    }
    emit(figures, args.json_out)
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
