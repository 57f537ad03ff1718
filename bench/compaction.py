"""Compaction throughput against Spark's own Parquet read-and-write of the same rows.

For each table version of `--table-versions` (default 6 and 9: timeline layouts 1 and 2),
and for each of `--metadata-versions` (default 6 and 9) once more with a metadata table (`files` and
`record_index`, kept by the writer on every commit and by the compaction's own metadata delta
commit), builds a merge-on-read table of `--rows` rows (default 2 million) with `--update-fraction`
of them (default 20%) updated across `--delta-commits` delta commits, schedules a compaction
and times `execute_compaction`. The baseline, measured once in the same run on the same Spark
session, reads the same number of rows from Parquet and writes them back. Prints rows per
second of each and their ratio to the one baseline (goal: at least 0.5).

    .venv/bin/python bench/compaction.py [--rows N] [--table-versions 6,9]
        [--metadata-versions 6,9] [--master local[*]]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine
from tms.hudi.sample_writer.new_table import create_table
from tms.hudi.sample_writer.writer import HudiWriter
from tms.hudi.table import HudiTable
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.services.execution import ServiceResult
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


METADATA_PARTITIONS = ("files", "record_index")


def build_table(
    base: str,
    rows: int,
    update_fraction: float,
    delta_commits: int,
    table_version: int,
    metadata_table: bool = False,
) -> dict[str, float]:
    rng = np.random.default_rng(7)
    table = create_table(
        base,
        "bench_trips",
        record_key_fields=["uuid"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=table_version,
        metadata_partitions=METADATA_PARTITIONS if metadata_table else (),
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
    files = [str(p) for p in Path(base).rglob("*.parquet") if ".hoodie" not in p.parts]
    started = time.perf_counter()
    frame = spark.read.parquet(*files)
    frame.write.mode("overwrite").parquet(out)
    elapsed = time.perf_counter() - started
    return frame.count(), elapsed


def compact(spark: object, base: str) -> tuple[float, ServiceResult]:
    """Schedule and execute one compaction of the table at `base`; its seconds and result."""
    table = HudiTable.open(base)
    instant = schedule_compaction(table)
    assert instant is not None, "nothing to compact"
    started = time.perf_counter()
    result = execute_compaction(spark, table, instant)
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--update-fraction", type=float, default=0.2)
    parser.add_argument("--delta-commits", type=int, default=4)
    parser.add_argument("--table-versions", default="6,9")
    parser.add_argument(
        "--metadata-versions",
        default="6,9",
        help="table versions compacted once more with a metadata table; '' for none",
    )
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    versions = [int(v) for v in args.table_versions.split(",") if v]
    with_metadata = [int(v) for v in args.metadata_versions.split(",") if v]
    # Each table: (name in the figures, table version, with a metadata table)
    tables = [(f"v{v}", v, False) for v in versions]
    tables += [(f"v{v}_metadata_table", v, True) for v in with_metadata]

    work = Path(args.workdir or tempfile.mkdtemp(prefix="tms-bench-"))
    bases = {name: str(work / f"bench_trips_{name}") for name, _, _ in tables}
    builds = {}
    for name, version, metadata_table in tables:
        shutil.rmtree(bases[name], ignore_errors=True)
        builds[name] = build_table(
            bases[name],
            args.rows,
            args.update_fraction,
            args.delta_commits,
            version,
            metadata_table,
        )
    spark = get_spark(args.master, app_name="tms-bench-compaction")

    # Warm the session and Python workers once so neither measurement pays for start-up.
    spark.sparkContext.parallelize(range(4), 4).map(lambda x: x).collect()
    # The baseline runs twice and keeps its better time, so JVM warm-up does not count.
    first = bases[tables[0][0]]
    runs = [baseline(spark, first, str(work / f"baseline_out_{i}")) for i in range(2)]
    baseline_rows, baseline_seconds = min(runs, key=lambda run: run[1])
    theirs = baseline_rows / baseline_seconds

    per_table = {}
    for name, base in bases.items():
        seconds, result = compact(spark, base)
        ours = result.records_written / seconds
        per_table[name] = {
            "file_groups": result.file_groups,
            "log_records_compacted": result.log_records_compacted,
            "compaction_seconds": round(seconds, 2),
            "compaction_rows_per_second": round(ours),
            "ratio": round(ours / theirs, 3),
            "table_build_seconds": round(
                builds[name]["insert_seconds"] + builds[name]["update_seconds"], 1
            ),
        }
    figures = {
        "machine": machine(),
        "master": args.master,
        "rows": args.rows,
        "updated_rows": int(builds[tables[0][0]]["updated_rows"]),
        "delta_commits": args.delta_commits,
        "baseline_rows": baseline_rows,
        "baseline_seconds": round(baseline_seconds, 2),
        "baseline_rows_per_second": round(theirs),
        "tables": per_table,
    }
    print(json.dumps(figures, indent=2))
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
