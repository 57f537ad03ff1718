"""The record index log files of one clustering task (`write_record_index_logs`): `--keys`
record keys (default 1 million, `key-000000000` on, as `bench/clustering.py` writes them) moved
to `--files` new files (default 40) in 4 data partitions, routed to `--file-groups` record index
file groups (default 10), written to a temporary folder. Prints seconds and keys per second,
the best of `--repeat` runs. With `--arrow` each new file's keys are an Arrow column, as a
clustering task hands them (code that takes only lists of strings fails with it).

With `--src DIR` (repeatable) each run imports `tms` from DIR in a process of its own, the
sources taking turns run by run, so two versions of the code are measured in one run on one
machine (for instance an exported earlier commit's `src` against the checkout's).

    .venv/bin/python bench/record_index_logs.py [--keys N] [--files N] [--file-groups N]
        [--repeat N] [--arrow] [--src DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import emit, machine

INSTANT = "20261127120000123"
BASE_INSTANT = "20261127000000000"
PARTITIONS = 4


def measure_once(keys: int, files: int, file_groups: int, arrow: bool = False) -> float:
    """Seconds of one `write_record_index_logs` call, in this process's `tms`."""
    import pyarrow as pa

    from tms.hudi.files.fs_view import FileSlice
    from tms.hudi.metadata.record_index_logs import RecordIndexLogs, write_record_index_logs
    from tms.hudi.metadata.schema import METADATA_RECORD_1X
    from tms.hudi.timeline.layout import TimelineLayout

    names = [f"key-{i:09d}" for i in range(keys)]
    per_file = -(-keys // files)
    moved = [
        (
            f"city=c{n % PARTITIONS}",
            f"{n:08x}-1f2d-4e6a-9b0c-1d2e3f4a5b6c-0",
            pa.array(names[n * per_file : (n + 1) * per_file], pa.string())
            if arrow
            else names[n * per_file : (n + 1) * per_file],
        )
        for n in range(files)
    ]
    slices = tuple(
        FileSlice("record_index", f"record-index-{n:04d}-0", BASE_INSTANT)
        for n in range(file_groups)
    )
    with tempfile.TemporaryDirectory(prefix="tms-bench-ril-") as root:
        target = RecordIndexLogs(
            root, INSTANT, METADATA_RECORD_1X, TimelineLayout(2, ".hoodie/timeline"), slices, 1
        )
        started = time.perf_counter()
        write_record_index_logs(target, moved, "0-0-0")
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--file-groups", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--arrow", action="store_true", help="keys as Arrow columns")
    parser.add_argument("--src", action="append", default=[], help="a `src` folder to import")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = (args.keys, args.files, args.file_groups, args.arrow)
    if args.once:
        print(json.dumps(measure_once(*sizes)))
        return
    sources = args.src or [""]
    seconds: dict[str, list[float]] = {source: [] for source in sources}
    for _ in range(args.repeat):
        for source in sources:
            if not source:
                seconds[source].append(measure_once(*sizes))
                continue
            env = {**os.environ, "PYTHONPATH": str(Path(source).resolve())}
            command = [sys.executable, __file__, "--once", *_sizes_args(args)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
            seconds[source].append(float(out.stdout.strip().splitlines()[-1]))
    report = {
        "machine": machine(),
        "keys": args.keys,
        "files": args.files,
        "file_groups": args.file_groups,
        "arrow": args.arrow,
        "runs": {
            source or "this checkout": {
                "seconds": [round(s, 3) for s in runs],
                "best_seconds": round(min(runs), 3),
                "keys_per_second": round(args.keys / min(runs)),
            }
            for source, runs in seconds.items()
        },
    }
    for source, result in report["runs"].items():
        print(
            f"{source}: best {result['best_seconds']} s, {result['keys_per_second']:,} keys/s "
            f"(runs {result['seconds']})",
            file=sys.stderr,
        )
    emit(report)


def _sizes_args(args: argparse.Namespace) -> list[str]:
    sizes = {"--keys": args.keys, "--files": args.files, "--file-groups": args.file_groups}
    listed = [part for name, value in sizes.items() for part in (name, str(value))]
    return [*listed, "--arrow"] if args.arrow else listed


if __name__ == "__main__":
    main()
