"""Record index build throughput against Spark reading the same record keys from Parquet.

Builds a copy-on-write table of `--rows` rows (default 2 million, 4 partitions, files of
`--file-rows` rows) whose metadata table has only `files`, then times the `indexing` service
building `record_index` on it (schedule + execute: the build over Spark executors, a data file
group per task, shuffled to the record index's file groups, one HFile each; catch-up; commit).
The baseline, in the same run on the same Spark session, reads the `_hoodie_record_key` column
of the same base files and writes each key with its file name back as Parquet: the work any
key-to-file index needs at least. Prints rows per second of each and their ratio.

    .venv/bin/python bench/index.py [--rows N] [--file-rows N] [--master local[*]]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine
from tms.hudi.table import HudiTable
from tms.services.index import build as index_service
from tms.spark_runtime import get_spark
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

CITIES = ["amsterdam", "berlin", "chennai", "denver"]


def make_rows(ids: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "uuid": pa.array([f"key-{i:09d}" for i in ids]),
            "ts": pa.array(np.ones(n, dtype=np.int64)),
            "city": pa.array([CITIES[i % len(CITIES)] for i in ids]),
            "fare": pa.array(rng.uniform(5, 100, n)),
        }
    )


def build_table(base: str, rows: int, file_rows: int) -> float:
    rng = np.random.default_rng(7)
    table = create_table(
        base,
        "bench_keys",
        record_key_fields=["uuid"],
        ordering_field="ts",
        partition_fields=["city"],
        table_type="COPY_ON_WRITE",
        table_version=9,
        metadata_partitions=("files",),
    )
    started = time.perf_counter()
    HudiWriter(table, max_file_rows=file_rows).insert(make_rows(np.arange(rows), rng))
    return time.perf_counter() - started


def baseline(spark: Any, base: str, out: str) -> tuple[int, float]:
    """Spark reads every base file's record keys and writes (key, file) pairs as Parquet."""
    from pyspark.sql import functions as F

    files = [str(p) for p in Path(base).rglob("*.parquet") if ".hoodie" not in p.parts]
    started = time.perf_counter()
    keys = spark.read.parquet(*files).select(
        "_hoodie_record_key", F.input_file_name().alias("file")
    )
    keys.write.mode("overwrite").parquet(out)
    elapsed = time.perf_counter() - started
    return keys.count(), elapsed


def build_index(spark: Any, base: str) -> tuple[float, dict[str, Any]]:
    """Schedule and execute one `record_index` build; its seconds and figures."""
    table = HudiTable.open(base)
    started = time.perf_counter()
    instant = index_service.schedule(table, partitions=("record_index",))
    assert instant is not None, "nothing to index"
    result = index_service.execute(spark, table, instant)
    return time.perf_counter() - started, result.to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--file-rows", type=int, default=125_000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="tms-bench-"))
    base = str(work / "bench_keys")
    shutil.rmtree(base, ignore_errors=True)
    build_seconds = build_table(base, args.rows, args.file_rows)
    spark = get_spark(args.master, app_name="tms-bench-index")
    # Warm the session and Python workers once so neither measurement pays for start-up.
    spark.sparkContext.parallelize(range(4), 4).map(lambda x: x).collect()
    runs = [baseline(spark, base, str(work / f"baseline_out_{i}")) for i in range(2)]
    baseline_rows, baseline_seconds = min(runs, key=lambda run: run[1])
    theirs = baseline_rows / baseline_seconds

    seconds, result = build_index(spark, base)
    ours = args.rows / seconds
    figures = {
        "machine": machine(),
        "master": args.master,
        "rows": args.rows,
        "table_build_seconds": round(build_seconds, 1),
        "baseline_rows": baseline_rows,
        "baseline_seconds": round(baseline_seconds, 2),
        "baseline_rows_per_second": round(theirs),
        "index_seconds": round(seconds, 2),
        "index_rows_per_second": round(ours),
        "ratio": round(ours / theirs, 3),
        "index_result": result,
    }
    print(json.dumps(figures, indent=2))
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
