"""A file slice whose log file holds one large data block, merged within a task memory budget
against the same slice merged in memory.

Builds, under a temporary folder, a base file of `--base-rows` rows and one log file holding a
single data block (`--format avro` or `parquet`) of `--rows` updates and inserts: Hudi caps a
block at `hoodie.logfile.data.block.max.size` (256 MB by default), so one block may be hundreds
of MB. Each merge runs in a fresh Python process, which reports its peak resident memory
(VmHWM) and wall time: `budget` merges through local disk with `--budget` (the block decoded
from the file a chunk at a time), the baseline merges in memory (a budget larger than the
slice). Prints both, and budget/baseline for memory and time.

    .venv/bin/python bench/log_blocks.py [--rows 2000000] [--format avro] [--budget 64m]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, own_peak_rss
from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.files.data import write_base_file
from tms.hudi.files.log_writer import encode_avro_data_block
from tms.hudi.meta_fields import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY
from tms.hudi.storage import Storage
from tms.spark_runtime.task_memory import parse_size
from tms.testing.sample_writer.log_blocks import encode_parquet_data_block

FILE_ID = "bench-0"
BASE_INSTANT = "20260101000000000"
LOG_INSTANT = "20260101000000001"
BASE_NAME = f"{FILE_ID}_0-1-0_{BASE_INSTANT}.parquet"
LOG_NAME = f".{FILE_ID}_{BASE_INSTANT}.log.1_0-1-0"


def _rows(ids: np.ndarray, instant: str, rng: np.random.Generator) -> pa.Table:
    keys = pa.array([f"key-{i:010d}" for i in ids])
    n = len(ids)
    return pa.table(
        {
            COMMIT_TIME: pa.array([instant] * n),
            COMMIT_SEQNO: pa.array([f"{instant}_0_{i}" for i in range(n)]),
            RECORD_KEY: keys,
            PARTITION_PATH: pa.array([""] * n),
            FILE_NAME: pa.array([BASE_NAME] * n),
            "id": keys,
            "ts": pa.array(rng.integers(0, 1 << 40, n)),
            "fare": pa.array(rng.random(n)),
            "note": pa.array([f"n{v:x}" * 3 for v in rng.integers(0, 1 << 60, n)]),
        }
    )


def build(root: Path, rows: int, base_rows: int, block_format: str) -> dict[str, int]:
    rng = np.random.default_rng(7)
    storage = Storage(str(root))
    base = _rows(np.arange(base_rows), BASE_INSTANT, rng)
    avro = avro_record_schema("bench", base.schema)
    write_base_file(storage, BASE_NAME, base, avro)
    updates = _rows(rng.integers(0, base_rows + rows // 2, rows), LOG_INSTANT, rng)
    if block_format == "parquet":
        block = encode_parquet_data_block(LOG_INSTANT, avro, updates)
    else:
        block = encode_avro_data_block(LOG_INSTANT, avro, updates.to_pylist())
    storage.write_bytes(LOG_NAME, block)
    return {"base_bytes": (root / BASE_NAME).stat().st_size, "log_bytes": len(block)}


def merge(root: str, budget: int) -> None:
    """In the child process: merge the slice and print its figures as JSON."""
    from tms.hudi.files.fs_view import BaseFile, FileSlice, LogFile
    from tms.hudi.files.names import BaseFileName, LogFileName
    from tms.hudi.files.spilled_slice import merge_file_slice

    storage = Storage(root)
    base = BaseFile(BaseFileName.parse(BASE_NAME), BASE_NAME, storage.info(BASE_NAME).size)  # type: ignore[arg-type]
    log = LogFile(LogFileName.parse(LOG_NAME), LOG_NAME, storage.info(LOG_NAME).size)  # type: ignore[arg-type]
    file_slice = FileSlice("", FILE_ID, BASE_INSTANT, base, (log,))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=root) as workdir:
        merged = merge_file_slice(
            storage, file_slice, "ts", lambda _: True, budget=budget, workdir=workdir
        )
        rows = sum(part.rows.num_rows for part in merged.parts)
    seconds = time.perf_counter() - started
    peak = own_peak_rss()
    print(json.dumps({"rows": rows, "seconds": seconds, "peak": peak, "spilled": merged.spilled}))


def run_child(root: Path, budget: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(root), "--budget", str(budget)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="records in the log block")
    parser.add_argument("--base-rows", type=int, default=1_000_000)
    parser.add_argument("--format", choices=["avro", "parquet"], default="avro")
    parser.add_argument("--budget", default="64m", help="the task memory budget, e.g. 64m")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    budget = parse_size(args.budget)
    if args.child:
        merge(args.child, budget)
        return
    print(machine())
    with tempfile.TemporaryDirectory(prefix="tms-bench-log-") as folder:
        root = Path(folder)
        sizes = build(root, args.rows, args.base_rows, args.format)
        print(
            f"slice: base file {sizes['base_bytes'] / 1e6:.1f} MB ({args.base_rows:,} rows), "
            f"one {args.format} log block {sizes['log_bytes'] / 1e6:.1f} MB ({args.rows:,} records)"
        )
        baseline = run_child(root, 1 << 40)
        budgeted = run_child(root, budget)
    for name, figures in (("in memory (baseline)", baseline), (f"budget {args.budget}", budgeted)):
        rate = figures["rows"] / figures["seconds"]
        print(
            f"{name:22} {figures['seconds']:7.2f} s  {rate:12,.0f} rows/s"
            f"  peak {figures['peak'] / 2**20:7.0f} MiB  spilled={figures['spilled']}"
        )
    print(
        f"budget/baseline: memory {budgeted['peak'] / baseline['peak']:.2f}, "
        f"time {budgeted['seconds'] / baseline['seconds']:.2f}"
    )


if __name__ == "__main__":
    main()
