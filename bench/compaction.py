"""Compaction by tms's own executor and by Hudi's, against Spark's own Parquet read-and-write of
the same rows.

For each table version of `--table-versions` (default 6 and 9: timeline layouts 1 and 2),
and for each of `--metadata-versions` (default 6 and 9) once more with a metadata table (`files` and
`record_index`, kept by the writer on every commit and by the compaction's own metadata delta
commit), builds a merge-on-read table of `--rows` rows (default 1 million) with `--update-fraction`
of them (default 20%) updated across `--delta-commits` delta commits and plans its compaction
with tms's planner. Each executor of `--executors` (default `native,hudi`) runs that plan on its
own copy of the planned table, in one Spark session carrying Hudi's bundle; the order alternates
from table to table, after both ran once on a small table to warm the session. The baseline,
measured per table in the same session, reads the table's base files (the same rows) from
Parquet and writes them back. Prints rows per second, wall time and peak driver memory of each
executor, native/hudi, each one's ratio to the baseline, and the goals (native at least 1.5×
Hudi's throughput and at least 0.9× the baseline). An executor that fails on a table is a
line with its error.

    .venv/bin/python bench/compaction.py [--rows N] [--table-versions 6,9]
        [--metadata-versions 6,9] [--executors native,hudi] [--master local[*]]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit, machine
from bench.executors import (
    add_arguments,
    bench_tables,
    build_tables,
    hudi_session,
    measure,
    parse_executors,
)
from tms.hudi.actions import COMPACTION
from tms.hudi.table import HudiTable
from tms.services.registry import table_service
from tms.spark_runtime.task_memory import SETTING
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

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
    file_rows: int = 125_000,
    partitioned: bool = True,
) -> dict[str, float]:
    rng = np.random.default_rng(7)
    table = create_table(
        base,
        "bench_trips",
        record_key_fields=["uuid"],
        ordering_field="ts",
        partition_fields=["city"] if partitioned else [],
        table_version=table_version,
        metadata_partitions=METADATA_PARTITIONS if metadata_table else (),
    )
    writer = HudiWriter(table, max_file_rows=file_rows)
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


WARM_UP_ROWS = 20_000


def plan(base: str) -> str:
    """tms's planner plans the compaction of the table at `base`; its instant."""
    instant = table_service(COMPACTION).schedule(HudiTable.open(base), {})
    assert instant is not None, "nothing to compact"
    return instant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--update-fraction", type=float, default=0.2)
    parser.add_argument("--delta-commits", type=int, default=4)
    parser.add_argument(
        "--file-rows", type=int, default=125_000, help="rows per file group (base file)"
    )
    parser.add_argument(
        "--unpartitioned", action="store_true", help="one partition: --rows/--file-rows slices"
    )
    parser.add_argument("--task-memory", default=None, help=f"{SETTING} for tms's tasks, e.g. 256m")
    add_arguments(parser, "compacted")
    args = parser.parse_args()
    executors = parse_executors(args.executors)
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
            not args.unpartitioned,
        ),
    )
    spark = hudi_session(args.master, "tms-bench-compaction", executors)
    if args.task_memory:
        spark.conf.set(SETTING, args.task_memory)

    # Both executors run once on a small table, so neither measurement pays for warm-up.
    warm = str(work / "bench_trips_warm_up")
    shutil.rmtree(warm, ignore_errors=True)
    build_table(warm, WARM_UP_ROWS, args.update_fraction, args.delta_commits, 9)
    bases = {name: base for name, (base, _) in built.items()}
    per_table = measure(
        spark,
        COMPACTION,
        warm,
        bases,
        executors,
        lambda base: (plan(base), shutil.copytree),
        args.repeat,
        args.profile,
    )
    for name, (_, build) in built.items():
        seconds = build["insert_seconds"] + build["update_seconds"]
        per_table[name]["table_build_seconds"] = round(seconds, 1)
    figures = {
        "machine": machine(),
        "master": args.master,
        "rows": args.rows,
        "updated_rows": int(args.rows * args.update_fraction / args.delta_commits)
        * args.delta_commits,
        "delta_commits": args.delta_commits,
        "file_rows": args.file_rows,
        "partitioned": not args.unpartitioned,
        "task_memory": args.task_memory or "default",
        "executors": executors,
        "tables": per_table,
    }
    emit(figures, args.json_out)
    spark.stop()
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
