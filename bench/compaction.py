"""Compaction throughput against Spark's own Parquet read-and-write of the same rows.

Builds a merge-on-read table of `--rows` rows (default 2 million) with `--update-fraction`
of them (default 20%) updated across `--delta-commits` delta commits, schedules a compaction
and times `execute_compaction`. The baseline, measured in the same run on the same Spark
session, reads the same number of rows from Parquet and writes them back. Prints rows per
second of both and their ratio (goal: at least 0.5).

    .venv/bin/python bench/compaction.py [--rows N] [--master local[*]]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from tms.hudi.table import HudiTable
from tms.hudi.write.new_table import create_table
from tms.hudi.write.writer import HudiWriter
from tms.services.compaction import execute_compaction, schedule_compaction
from tms.spark_runtime import get_spark

CITIES = ["amsterdam", "berlin", "chennai", "denver"]


def make_rows(ids: np.ndarray, ts: int, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "uuid": pa.array([f"key-{i:09d}" for i in ids]),
            "ts": pa.array(np.full(n, ts, dtype=np.int64)),
            "city": pa.array([CITIES[i % len(CITIES)] for i in ids]),
            "rider": pa.array([f"rider-{i % 5000}" for i in ids]),
            "fare": pa.array(rng.uniform(5, 100, n)),
            "distance_km": pa.array(rng.uniform(0.5, 40, n)),
            "tip": pa.array(rng.uniform(0, 20, n).astype(np.float32)),
        }
    )


def build_table(
    base: str, rows: int, update_fraction: float, delta_commits: int
) -> dict[str, float]:
    rng = np.random.default_rng(7)
    table = create_table(
        base,
        "bench_trips",
        record_key_fields=["uuid"],
        ordering_field="ts",
        partition_fields=["city"],
    )
    writer = HudiWriter(table, max_file_rows=125_000)
    started = time.perf_counter()
    writer.insert(make_rows(np.arange(rows), 1, rng))
    inserted = time.perf_counter() - started
    per_commit = int(rows * update_fraction / delta_commits)
    updated = rng.permutation(rows)[: per_commit * delta_commits]
    started = time.perf_counter()
    for commit in range(delta_commits):
        chunk = np.sort(updated[commit * per_commit : (commit + 1) * per_commit])
        writer.upsert(make_rows(chunk, 2 + commit, rng))
    return {
        "insert_seconds": inserted,
        "update_seconds": time.perf_counter() - started,
        "updated_rows": float(len(updated)),
    }


def baseline(spark: object, base: str, out: str) -> tuple[int, float]:
    """Spark reads the table's base files (the same rows) and writes them back as Parquet."""
    files = [str(p) for p in Path(base).rglob("*.parquet")]
    started = time.perf_counter()
    frame = spark.read.parquet(*files)  # type: ignore[attr-defined]
    frame.write.mode("overwrite").parquet(out)
    elapsed = time.perf_counter() - started
    return frame.count(), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--update-fraction", type=float, default=0.2)
    parser.add_argument("--delta-commits", type=int, default=4)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="tms-bench-"))
    base = str(work / "bench_trips")
    shutil.rmtree(base, ignore_errors=True)
    build = build_table(base, args.rows, args.update_fraction, args.delta_commits)
    spark = get_spark(args.master, app_name="tms-bench-compaction")

    # Warm the session and Python workers once so neither measurement pays for start-up.
    spark.sparkContext.parallelize(range(4), 4).map(lambda x: x).collect()
    # The baseline runs twice and keeps its better time, so JVM warm-up does not count.
    runs = [baseline(spark, base, str(work / f"baseline_out_{i}")) for i in range(2)]
    baseline_rows, baseline_seconds = min(runs, key=lambda run: run[1])

    table = HudiTable.open(base)
    instant = schedule_compaction(table)
    assert instant is not None, "nothing to compact"
    started = time.perf_counter()
    result = execute_compaction(spark, table, instant)
    compaction_seconds = time.perf_counter() - started

    ours = result.records_written / compaction_seconds
    theirs = baseline_rows / baseline_seconds
    figures = {
        "machine": f"{platform.node()} {platform.machine()} {platform.processor() or ''}".strip(),
        "master": args.master,
        "rows": args.rows,
        "updated_rows": int(build["updated_rows"]),
        "delta_commits": args.delta_commits,
        "file_groups": result.file_groups,
        "log_records_compacted": result.log_records_compacted,
        "compaction_seconds": round(compaction_seconds, 2),
        "compaction_rows_per_second": round(ours),
        "baseline_rows": baseline_rows,
        "baseline_seconds": round(baseline_seconds, 2),
        "baseline_rows_per_second": round(theirs),
        "ratio": round(ours / theirs, 3),
        "table_build_seconds": round(build["insert_seconds"] + build["update_seconds"], 1),
    }
    print(json.dumps(figures, indent=2))
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
