"""Clustering by tms's own executor and by Hudi's, against Spark's own Parquet read-and-write of
the same rows.

For each table version of `--table-versions` (default 6 and 9), and for each of
`--metadata-versions` (default 6 and 9) once more with a metadata table (`files` and
`record_index`, kept by the writer on every commit), builds a copy-on-write table of `--rows`
rows (default 1 million) in 4 partitions, inserted over `--commits` commits (default 10), so
each partition holds `--commits` small file groups. Each executor of `--executors` (default
`native,hudi`) gets its own copy of the table, on which tms's planner plans their clustering at
one instant time, so both run the same plan (`--small-file-limit` selects every small file
group, `--target-file-size` merges each partition's into one), in one Spark session carrying
Hudi's bundle; the order
alternates from table to table, after both ran once on a small table to warm the session. The
baseline, measured per table in the same session, reads the table's base files (the rows the
plan rewrites) from Parquet and writes them back. Prints rows per second, wall time and peak
driver memory of each executor, native/hudi, each one's ratio to the baseline, and the goals
(native at least 1.5× Hudi's throughput and at least 0.9× the baseline). An executor that fails
on a table is a line with its error.

    .venv/bin/python bench/clustering.py [--rows N] [--commits N] [--table-versions 6,9]
        [--metadata-versions 6,9] [--executors native,hudi] [--master local[*]]
        [--unpartitioned] [--sort-columns fare] [--max-bytes-per-group B] [--task-memory 256m]

A production-size group: `--unpartitioned --rows 13000000 --commits 10 --sort-columns fare
--target-file-size 536870912` is one group of about 0.5 GB of Parquet.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit, machine
from bench.compaction import CITIES, METADATA_PARTITIONS, make_rows
from bench.executors import (
    add_arguments,
    bench_tables,
    build_tables,
    hudi_session,
    measure,
    parse_executors,
)
from tms.hudi.actions import CLUSTERING
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.table import HudiTable
from tms.hudi.timeline.transitions import new_instant_time
from tms.services.clustering.plan import schedule_clustering
from tms.spark_runtime.task_memory import SETTING
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

MIB = 2**20
WARM_UP_ROWS = 20_000


def build_table(
    base: str,
    rows: int,
    commits: int,
    table_version: int,
    metadata_table: bool = False,
    partitioned: bool = True,
) -> float:
    """A copy-on-write table whose rows arrive in `commits` inserts: each insert writes one
    new small file group per partition (one partition when not `partitioned`). Seconds it
    took."""
    rng = np.random.default_rng(7)
    table = create_table(
        base,
        "bench_trips",
        table_type=COPY_ON_WRITE,
        record_key_fields=["uuid"],
        ordering_field="ts",
        partition_fields=["city"] if partitioned else [],
        table_version=table_version,
        metadata_partitions=METADATA_PARTITIONS if metadata_table else (),
    )
    per_commit = rows // commits
    writer = HudiWriter(table, max_file_rows=per_commit)
    started = time.perf_counter()
    for commit in range(commits):
        writer.insert(make_rows(np.arange(commit * per_commit, (commit + 1) * per_commit), 1, rng))
    return time.perf_counter() - started


@dataclass(frozen=True)
class PlannedCopy:
    """Copies the built table and plans its clustering on the copy with tms's planner, at
    one instant time for every copy: a clustering plan names its input files by their full
    paths, which tms's executor keeps inside the table it runs on, so each copy carries the
    same plan of its own files."""

    instant: str
    small_file_limit: int
    target_file_size: int
    max_bytes_per_group: int | None
    sort_columns: tuple[str, ...]

    @classmethod
    def of(cls, base: str, args: argparse.Namespace) -> PlannedCopy:
        instant = new_instant_time(HudiTable.open(base).timeline().instants)
        sort_columns = tuple(c for c in args.sort_columns.split(",") if c)
        return cls(
            instant,
            args.small_file_limit,
            args.target_file_size,
            args.max_bytes_per_group,
            sort_columns,
        )

    def __call__(self, source: str, target: str) -> None:
        shutil.copytree(source, target)
        planned = schedule_clustering(
            HudiTable.open(target),
            small_file_limit=self.small_file_limit,
            target_file_size=self.target_file_size,
            max_bytes_per_group=self.max_bytes_per_group,
            sort_columns=self.sort_columns,
            instant_time=self.instant,
        )
        assert planned == self.instant, "no small file groups to cluster"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=10, help="small file groups per partition")
    parser.add_argument("--small-file-limit", type=int, default=100 * MIB)
    parser.add_argument("--target-file-size", type=int, default=1024 * MIB)
    parser.add_argument(
        "--max-bytes-per-group", type=int, default=None, help="default: --target-file-size"
    )
    parser.add_argument("--sort-columns", default="", help="e.g. fare; default: no sort")
    parser.add_argument(
        "--unpartitioned", action="store_true", help="one partition: one clustering group"
    )
    parser.add_argument("--task-memory", default=None, help=f"{SETTING} for tms's tasks, e.g. 256m")
    add_arguments(parser, "clustered")
    args = parser.parse_args()
    executors = parse_executors(args.executors)
    tables = bench_tables(args)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="tms-bench-"))
    built = build_tables(
        work,
        tables,
        lambda base, t: build_table(
            base, args.rows, args.commits, t.version, t.metadata_table, not args.unpartitioned
        ),
    )
    spark = hudi_session(args.master, "tms-bench-clustering", executors)
    if args.task_memory:
        spark.conf.set(SETTING, args.task_memory)

    # Both executors run once on a small table, so neither measurement pays for warm-up.
    warm = str(work / "bench_trips_warm_up")
    shutil.rmtree(warm, ignore_errors=True)
    build_table(warm, WARM_UP_ROWS, args.commits, 9)
    bases = {name: base for name, (base, _) in built.items()}

    def prepare(base: str) -> tuple[str, PlannedCopy]:
        planned = PlannedCopy.of(base, args)
        return planned.instant, planned

    per_table = measure(
        spark, CLUSTERING, warm, bases, executors, prepare, args.repeat, args.profile
    )
    for name, (_, build_seconds) in built.items():
        per_table[name]["table_build_seconds"] = round(build_seconds, 1)
    figures = {
        "machine": machine(),
        "master": args.master,
        "rows": args.rows,
        "partitions": 1 if args.unpartitioned else len(CITIES),
        "small_file_groups_per_partition": args.commits,
        "small_file_limit": args.small_file_limit,
        "target_file_size": args.target_file_size,
        "max_bytes_per_group": args.max_bytes_per_group or args.target_file_size,
        "sort_columns": args.sort_columns,
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
