"""`tms demo`: a merge-on-read table written, then compacted, clustered and cleaned on Spark,
with the independent reader (`hudi`, hudi-rs) checking that it still reads the same."""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tms.hudi.table import HudiTable
from tms.hudi.writer import HudiWriter, create_table
from tms.services.execution import ServiceResult
from tms.services.runner import ServiceRequest, run_service

CITIES = ("amsterdam", "berlin", "chennai", "denver")
Echo = Callable[[str], None]


@dataclass
class DemoReport:
    base_path: str
    commits: list[str] = field(default_factory=list)
    results: list[ServiceResult] = field(default_factory=list)
    files_before: int = 0
    files_after: int = 0
    slices_before: int = 0
    slices_after: int = 0
    oracle_rows: int = 0
    oracle_matches: bool = False


def trips(ids: list[int], ts: int, rng: random.Random) -> pa.Table:
    return pa.table(
        {
            "uuid": [f"trip-{i:07d}" for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": [CITIES[i % len(CITIES)] for i in ids],
            "rider": [f"rider-{rng.randrange(500)}" for _ in ids],
            "fare": [round(rng.uniform(5, 90), 2) for _ in ids],
        }
    )


def write_demo_table(base_path: str, rows: int, echo: Echo) -> tuple[HudiTable, list[str]]:
    """A partitioned merge-on-read table: an insert, then updates and a delete."""
    shutil.rmtree(base_path, ignore_errors=True)
    table = create_table(
        base_path,
        "demo_trips",
        record_key_fields=["uuid"],
        ordering_field="ts",
        partition_fields=["city"],
    )
    writer = HudiWriter(table, max_file_rows=max(rows // 16, 100))
    rng = random.Random(42)
    commits = [writer.insert(trips(list(range(rows)), 1, rng))]
    echo(f"  delta commit {commits[-1]}: inserted {rows} trips")
    for round_no in range(2, 6):
        ids = sorted(rng.sample(range(rows), rows // 10))
        commits.append(writer.upsert(trips(ids, round_no, rng)))
        echo(f"  delta commit {commits[-1]}: updated {len(ids)} trips")
    doomed = sorted(rng.sample(range(rows), rows // 50))
    commits.append(writer.delete(trips(doomed, 9, rng).select(["uuid", "city"])))
    echo(f"  delta commit {commits[-1]}: deleted {len(doomed)} trips")
    return table, commits


def data_files(base_path: str) -> int:
    return sum(
        1
        for p in Path(base_path).rglob("*")
        if p.is_file() and ".hoodie" not in p.parts and not p.name.startswith(".hoodie")
    )


def run_demo(base_path: str, rows: int, master: str, echo: Echo) -> DemoReport:
    """Write the table, run the three services on Spark, and check it with the oracle."""
    from tms.verify import oracle_snapshot

    report = DemoReport(base_path)
    echo(f"Writing a merge-on-read table at {base_path}")
    table, report.commits = write_demo_table(base_path, rows, echo)
    before = oracle_snapshot(base_path)
    report.files_before = data_files(base_path)
    report.slices_before = len(table.file_system_view().latest_file_slices())
    echo(f"  {report.files_before} data files, {report.slices_before} file groups")
    steps = [
        ServiceRequest("compaction", master=master, heartbeat_interval=10),
        ServiceRequest(
            "clustering",
            master=master,
            sort_columns=["rider"],
            target_file_size=4 * 1024 * 1024,
            small_file_limit=2 * 1024 * 1024,
            heartbeat_interval=10,
        ),
        ServiceRequest("clean", master=master, retain=1, heartbeat_interval=10),
    ]
    for step in steps:
        echo(f"Running {step.service} on Spark ({master})")
        started = time.monotonic()
        result = run_service(HudiTable.open(base_path), step)
        if result is None:
            echo(f"  {step.service}: nothing to do")
            continue
        report.results.append(result)
        echo(
            f"  {result.action} {result.instant} {result.state} in "
            f"{time.monotonic() - started:.1f}s: {result.file_groups} file groups, "
            f"{result.files_written} files written, {result.files_deleted} deleted, "
            f"{result.records_written} records"
        )
    after = oracle_snapshot(base_path)
    report.files_after = data_files(base_path)
    report.slices_after = len(HudiTable.open(base_path).file_system_view().latest_file_slices())
    report.oracle_rows = after.num_rows
    report.oracle_matches = before.equals(after)
    return report
