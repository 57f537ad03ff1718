"""A fleet of small tables all due for compaction at once: spark-submit against resident
workers.

Writes `--tables` small merge-on-read tables (an insert, then an update: one log file per
file group), registers them, and submits all their compactions at once (what crossing the
compaction threshold on every table at the same moment creates). Run twice on copies of the
same tables, each with a fresh database and a service in this process (`serve_in_thread`),
with the same `--max-running`:

- baseline, `spark-submit`: the scheduler launches each attempt (`max_running_per_instance`);
- `spark-worker`: the service starts one resident worker (`TMS_WORKERS=1`) with that many
  slots, and the scheduler launches nothing (`max_running_per_instance=0`).

Figures per run: time from the first submit until every operation completed, launch
overhead (claim to the job's first heartbeat, from each attempt's `launch_seconds`) p50/p99,
peak resident memory of this process and everything it started (sampled every 0.5 s). Goals:
worker launch overhead p50 <= 1 s; worker fleet time <= 1/5 of spark-submit's.

    .venv/bin/python bench/fleet.py [--tables 200] [--max-running 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    _descendants,
    bench_settings,
    emit,
    fresh_database,
    goal,
    log,
    machine,
    percentiles,
    ratio,
)

TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "INVALID"})


def write_tables(root: Path, count: int) -> list[Path]:
    """Small merge-on-read tables with a log file per file group."""
    import pyarrow as pa

    from tms.testing.sample_writer.new_table import create_table
    from tms.testing.sample_writer.writer import HudiWriter

    def rows(ids: range, ts: int) -> pa.Table:
        items = list(ids)
        return pa.table(
            {
                "id": pa.array([f"k{i:04d}" for i in items]),
                "ts": pa.array([ts] * len(items), pa.int64()),
                "fare": pa.array([float(i) for i in items]),
            }
        )

    paths = []
    for number in range(count):
        path = root / f"t{number:04d}"
        table = create_table(
            str(path),
            f"t{number:04d}",
            table_type="MERGE_ON_READ",
            record_key_fields=["id"],
            ordering_field="ts",
            extra_properties={"hoodie.database.name": "fleet"},
        )
        writer = HudiWriter(table)
        writer.insert(rows(range(50), ts=1))
        writer.upsert(rows(range(0, 50, 5), ts=2))
        paths.append(path)
    return paths


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total / 1024


class PeakMemory:
    """Samples the resident memory of this process and all its descendants."""

    def __init__(self, every: float = 0.5) -> None:
        self.peak_mb = 0.0
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import os

        me = os.getpid()
        while not self._stop.wait(self._every):
            self.peak_mb = max(self.peak_mb, _rss_mb([me, *_descendants(me)]))


def run_fleet(engine: str, tables: list[Path], max_running: int, work: Path) -> dict[str, Any]:
    from tms.serve import free_port, serve_in_thread

    worker = engine == "spark-worker"
    with fresh_database("tms_bench_fleet") as db:
        settings = bench_settings(
            db.url,
            work / f"data-{engine}",
            port=free_port(),
            max_running_per_instance=0 if worker else max_running,
            workers=1 if worker else 0,
            worker_slots=max_running,
            scheduler_interval_seconds=0.2,
            compaction_delta_commits=0,
            clean_commits=0,
            spark_master="local[1]",
        )
        with PeakMemory() as memory, serve_in_thread(settings) as service:
            url = service.url
            client = httpx.Client(base_url=url, timeout=60)
            if worker:
                deadline = time.monotonic() + 180
                while not client.get("/v1/workers").json():
                    if time.monotonic() > deadline:
                        raise RuntimeError("the resident worker did not register")
                    time.sleep(0.2)
            for path in tables:
                client.post(
                    "/v1/tables",
                    json={"db_name": "fleet", "table_name": path.name, "base_path": str(path)},
                ).raise_for_status()
            log(f"{engine}: {len(tables)} tables registered; submitting their compactions")
            started = time.monotonic()
            ids = [
                client.post(
                    "/v1/hoodie/service/compact/submit",
                    json={"db_name": "fleet", "table_name": path.name},
                ).json()["id"]
                for path in tables
            ]
            pending = set(ids)
            while pending:
                page = client.get("/v1/operations", params={"limit": 500}).json()
                for item in page["items"]:
                    if item["id"] in pending and item["status"] in TERMINAL:
                        pending.discard(item["id"])
                time.sleep(0.5)
            fleet_seconds = time.monotonic() - started
            statuses: dict[str, int] = {}
            launches = []
            for operation_id in ids:
                status = client.get(f"/v1/operations/{operation_id}").json()["status"]
                statuses[status] = statuses.get(status, 0) + 1
                for attempt in client.get(f"/v1/operations/{operation_id}/attempts").json():
                    if attempt["launch_seconds"] is not None:
                        launches.append(attempt["launch_seconds"])
            client.close()
        log(f"{engine}: {fleet_seconds:.1f} s, {statuses}")
        return {
            "engine": engine,
            "fleet_seconds": round(fleet_seconds, 2),
            "statuses": statuses,
            "launch_overhead_ms": percentiles(launches),
            "peak_rss_mb": round(memory.peak_mb),
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--max-running", type=int, default=2)
    parser.add_argument("--json-out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tms-bench-fleet-"))
    try:
        log(f"writing {args.tables} tables")
        originals = write_tables(work / "lake", args.tables)
        runs = {}
        for engine in ("spark-submit", "spark-worker"):
            copy = work / f"lake-{engine}"
            shutil.copytree(work / "lake", copy)
            tables = [copy / path.name for path in originals]
            runs[engine] = run_fleet(engine, tables, args.max_running, work)
        submit, worker = runs["spark-submit"], runs["spark-worker"]
        fleet_ratio = ratio(worker["fleet_seconds"], submit["fleet_seconds"])
        emit(
            {
                "benchmark": "fleet",
                "tables": args.tables,
                "max_running": args.max_running,
                "machine": machine(),
                "runs": runs,
                "fleet_time_ratio_worker_to_spark_submit": fleet_ratio,
                "goals": {
                    "worker_launch_p50_s": goal(
                        round((worker["launch_overhead_ms"].get("p50") or 0) / 1000, 3), 1.0
                    ),
                    "fleet_time_ratio": goal(fleet_ratio, 0.2),
                },
            },
            args.json_out,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
