"""A record index file slice of the metadata table compacted key by key (tms's compaction)
against the same slice merged in memory (the metadata reader's merge, then one HFile written
from memory).

Builds, under a temporary folder, a record index file group of the metadata table: a base
HFile of `--keys` keys and `--logs` log files, each an HFile data block of updates (a tenth of
the keys moved to a new file) and a delete block (a twentieth of the keys). Each run is a fresh
Python process, which reports its peak resident memory (VmHWM) and wall time. Prints both,
and streamed/in-memory for memory and time.

    .venv/bin/python bench/metadata_compaction.py [--keys 2000000] [--logs 4] [--budget 64m]
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
from tms.hudi.files.log_block import DeleteRecord
from tms.hudi.files.log_writer import encode_delete_block
from tms.hudi.metadata.cells import location_value
from tms.hudi.metadata.compaction import MAX_RECORD_KEY, MIN_RECORD_KEY
from tms.hudi.metadata.records import RecordLocation, instant_millis
from tms.hudi.metadata.schema import writer_schema
from tms.hudi.metadata.writer import hfile_log_block, hfile_writer
from tms.spark_runtime.task_memory import parse_size

FILE_ID = "record-index-0000-0"
BASE_INSTANT = "20260101000000000"
COMPACTION = "20260102000000000"
SCHEMA = writer_schema(9, None)


def _instant(n: int) -> str:
    return str(int(BASE_INSTANT) + n)


def _keys(numbers: np.ndarray) -> pa.StringArray:
    return pa.array([f"{n:08x}-4b1e-9c2d-{n * 7919 % 10**12:012d}" for n in numbers])


def _hfile(path: str | None, keys: pa.StringArray, value: bytes) -> bytes:
    writer = hfile_writer(SCHEMA, path)
    order = keys.cast(pa.binary()).to_numpy(zero_copy_only=False).argsort(kind="stable")
    rows = keys.take(pa.array(order))
    writer.append_rows(rows, [value], np.zeros(len(rows), np.int64))
    writer.add_file_info(MIN_RECORD_KEY, rows[0].as_py().encode())
    writer.add_file_info(MAX_RECORD_KEY, rows[-1].as_py().encode())
    if path is None:
        return writer.finish()
    writer.close()
    return b""


def build(root: Path, keys: int, logs: int) -> dict[str, int]:
    rng = np.random.default_rng(5)
    folder = root / "record_index"
    folder.mkdir(parents=True)
    millis = instant_millis(BASE_INSTANT)
    base_value = location_value(RecordLocation("p0", "data-0", millis), SCHEMA)
    base_name = f"{FILE_ID}_0-0-0_{BASE_INSTANT}.hfile"
    _hfile(str(folder / base_name), _keys(np.arange(keys)), base_value)
    names = []
    for n in range(1, logs + 1):
        instant = _instant(n)
        moved = np.unique(rng.integers(0, keys * 11 // 10, keys // 10))
        value = location_value(RecordLocation("p1", f"data-{n}", instant_millis(instant)), SCHEMA)
        content = hfile_log_block(instant, SCHEMA, _hfile(None, _keys(moved), value))
        gone = _keys(np.unique(rng.integers(0, keys, keys // 20))).to_pylist()
        content += encode_delete_block(
            instant, json.loads(SCHEMA), [DeleteRecord(key, "") for key in gone]
        )
        name = f".{FILE_ID}_{instant}.log.1_0-0-{n}"
        (folder / name).write_bytes(content)
        names.append(name)
    return {
        "base_bytes": (folder / base_name).stat().st_size,
        "log_bytes": sum((folder / name).stat().st_size for name in names),
    }


def compact(root: str, way: str, budget: int) -> None:
    """In the child process: compact the slice one way and print its figures as JSON."""
    from tms.hudi.files.compaction_operation import CompactionOperation
    from tms.hudi.metadata.cells import cell_value
    from tms.hudi.metadata.compaction import (
        CompactionTask,
        base_hfile_content,
        compact_file_group,
    )
    from tms.hudi.metadata.slice_reader import read_slice
    from tms.hudi.storage import Storage

    folder = Path(root) / "record_index"
    base = next(p.name for p in folder.glob("*.hfile"))
    logs = tuple(sorted(p.name for p in folder.glob(".*.log.*")))
    operation = CompactionOperation("record_index", FILE_ID, BASE_INSTANT, base, logs, {})
    valid = frozenset(_instant(n) for n in range(len(logs) + 1))
    started = time.perf_counter()
    if way == "streamed":
        task = CompactionTask(root, COMPACTION, SCHEMA, valid, operation, budget)
        records = compact_file_group(task, "0-0-0").num_writes
    else:
        storage = Storage(root)
        merged = read_slice(storage, operation.file_slice(), valid.__contains__).merged()
        cells = [
            (key, cell_value(merged[key], SCHEMA))
            for key in sorted(merged, key=lambda k: k.encode())
        ]
        content = base_hfile_content(SCHEMA, cells)
        (folder / f"in-memory-{COMPACTION}.hfile").write_bytes(content)
        records = len(cells)
    seconds = time.perf_counter() - started
    peak = own_peak_rss()
    print(json.dumps({"records": records, "seconds": seconds, "peak": peak}))


def run_child(root: Path, way: str, budget: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", str(root), "--way", way]
    out = subprocess.run(
        [*command, "--budget", str(budget)], check=True, capture_output=True, text=True
    ).stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=2_000_000, help="keys in the base file")
    parser.add_argument("--logs", type=int, default=4, help="log files, one delta commit each")
    parser.add_argument("--budget", default="64m", help="the task memory budget, e.g. 64m")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--way", help=argparse.SUPPRESS)
    args = parser.parse_args()
    budget = parse_size(args.budget)
    if args.child:
        compact(args.child, args.way, budget)
        return
    print(machine())
    with tempfile.TemporaryDirectory(prefix="tms-bench-mdt-") as folder:
        root = Path(folder)
        sizes = build(root, args.keys, args.logs)
        print(
            f"record index slice: base HFile {sizes['base_bytes'] / 1e6:.1f} MB "
            f"({args.keys:,} keys), {args.logs} log files {sizes['log_bytes'] / 1e6:.1f} MB"
        )
        baseline = run_child(root, "in-memory", budget)
        streamed = run_child(root, "streamed", budget)
    assert streamed["records"] == baseline["records"], (streamed, baseline)
    for name, figures in (("in memory (baseline)", baseline), ("streamed", streamed)):
        rate = figures["records"] / figures["seconds"]
        print(
            f"{name:22} {figures['seconds']:7.2f} s  {rate:12,.0f} records/s"
            f"  peak {figures['peak'] / 2**20:7.0f} MiB  ({figures['records']:,} records)"
        )
    print(
        f"streamed/baseline: memory {streamed['peak'] / baseline['peak']:.2f}, "
        f"time {streamed['seconds'] / baseline['seconds']:.2f}"
    )


if __name__ == "__main__":
    main()
