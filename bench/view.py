"""Hudi's remote file-system view served by tms: latest-slices requests/s and latency, and the
storage listings saved, against listing the partition directly in the same run.

Writes a merge-on-read table (version 6 by default) of `--file-groups` file groups over
`--partitions` partitions with the project's writer, registers it, and starts the API server
in its own process. Then:

1. reads: `--requests` `GET /v1/hoodie/view/slices/partition/latest/` as Hudi's
   `RemoteHoodieTableFileSystemView` sends them (basepath, partition, lastinstantts,
   timelinehash), partitions round robin, from one keep-alive client (latency) and from
   `--clients` threads (requests/s). Baseline, same run: what a writer does without a
   timeline server for the same answer, `HudiTable.open` + the timeline + listing and
   building the partition (`FileSystemView.build(partitions=[p])`), on the same files.
2. writes: `--writers` writers on one table; each of `--commits` rounds one writer inserts
   a batch and the store records its commit (as the callback does), then every writer
   reloads its timeline and reads the latest slices of every partition (what an upsert's
   partitioner asks). Listings without tms: each writer's own view lists the timeline and
   every partition it reads, each round. With tms: what the server exported in
   `tms_view_storage_listings_total` (its cold build, then one timeline listing per
   commit). Goal: p99 <= 5 ms, >= 20x fewer listings.

    .venv/bin/python bench/view.py [--file-groups 1000] [--partitions 10] [--requests 2000]
        [--clients 4] [--writers 4] [--commits 20] [--table-version 6] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    api_server,
    emit,
    fresh_database,
    goal,
    log,
    machine,
    percentiles,
    ratio,
)
from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.table import HudiTable
from tms.store import (
    CommitIn,
    make_engine,
    make_session_factory,
    record_commits,
    register_table,
)
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter
from tms.view.visible_timeline import timeline_hash, visible_instants

ROWS_PER_GROUP = 4
PATH = "/v1/hoodie/view/slices/partition/latest/"


def batch(start: int, count: int, partitions: int, ts: int) -> pa.Table:
    ids = range(start, start + count)
    return pa.table(
        {
            "id": pa.array([f"k{i:07d}" for i in ids]),
            "part": pa.array([f"p{(i // ROWS_PER_GROUP) % partitions:02d}" for i in ids]),
            "ts": pa.array([ts] * count, pa.int64()),
            "v": pa.array([float(i) for i in ids]),
        }
    )


def write_table(root: Path, file_groups: int, partitions: int, version: int) -> HudiWriter:
    table = create_table(
        str(root),
        "view_bench",
        table_type="MERGE_ON_READ",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["part"],
        table_version=version,
    )
    writer = HudiWriter(table, max_file_rows=ROWS_PER_GROUP)
    rows = file_groups * ROWS_PER_GROUP
    rows = rows - rows % (ROWS_PER_GROUP * partitions)
    # rows sorted by partition so each file group gets ROWS_PER_GROUP rows
    data = batch(0, rows, partitions, 1)
    data = data.sort_by("part")
    writer.insert(data)
    return writer


class Client:
    """What a writer's remote view sends: its timeline's last instant and hash each call."""

    def __init__(self, url: str, base_path: str, root: Path) -> None:
        self.http = httpx.Client(base_url=url, timeout=60)
        self.base_path = base_path
        self.root = root
        self.reload()

    def reload(self) -> None:
        visible = visible_instants(HudiTable.open(str(self.root)).timeline())
        self.last = visible[-1].requested_time if visible else None
        self.hash = timeline_hash(visible)

    def latest_slices(self, partition: str) -> list[Any]:
        params = {"basepath": self.base_path, "partition": partition, "timelinehash": self.hash}
        if self.last:
            params["lastinstantts"] = self.last
        response = self.http.get(PATH, params=params)
        response.raise_for_status()
        result: list[Any] = response.json()
        return result


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if re.match(rf"^{name}(\{{|\s)", line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def direct(root: Path, partition: str) -> int:
    """The baseline: a writer's own view of one partition (timeline + listing + build)."""
    table = HudiTable.open(str(root))
    view = FileSystemView.build(table.storage, table.timeline(), partitions=[partition])
    return len(view.latest_file_slices())


def measure_reads(
    url: str, base_path: str, root: Path, partitions: list[str], requests: int, clients: int
) -> dict[str, Any]:
    client = Client(url, base_path, root)
    started = time.perf_counter()
    cold = len(client.latest_slices(partitions[0]))
    cold_ms = (time.perf_counter() - started) * 1000
    for p in partitions:  # warm the answers each partition gets
        client.latest_slices(p)
    latencies = []
    for i in range(requests):
        t = time.perf_counter()
        client.latest_slices(partitions[i % len(partitions)])
        latencies.append(time.perf_counter() - t)

    floor = []  # the HTTP stack's own cost: the smallest answer (last instant, no check)
    params = {"basepath": base_path, "timelinehash": client.hash}
    for _ in range(min(requests, 500)):
        t = time.perf_counter()
        client.http.get("/v1/hoodie/view/timeline/instant/last", params=params).raise_for_status()
        floor.append(time.perf_counter() - t)

    per_thread = max(1, requests // clients)
    done = [0]
    lock = threading.Lock()

    def run() -> None:
        own = Client(url, base_path, root)
        for i in range(per_thread):
            own.latest_slices(partitions[i % len(partitions)])
        with lock:
            done[0] += per_thread

    threads = [threading.Thread(target=run) for _ in range(clients)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = done[0] / (time.perf_counter() - t0)

    base_lat = []
    n = max(20, min(200, requests // 10))
    for i in range(n):
        t = time.perf_counter()
        direct(root, partitions[i % len(partitions)])
        base_lat.append(time.perf_counter() - t)
    base_rate = n / sum(base_lat)
    ours = percentiles(latencies)
    baseline = percentiles(base_lat)
    return {
        "slices_per_partition": cold,
        "cold_build_ms": round(cold_ms, 1),
        "tms_latency_ms": ours,
        "tms_requests_per_s": round(rate, 1),
        "last_instant_latency_ms": percentiles(floor),
        "direct_latency_ms": baseline,
        "direct_requests_per_s": round(base_rate, 1),
        "p99_ratio_to_direct": ratio(ours["p99"], baseline["p99"]),
        "p99_goal": goal(ours["p99"], 5.0),
    }


def measure_writes(
    url: str,
    db_url: str,
    tbl_id: int,
    writer: HudiWriter,
    base_path: str,
    root: Path,
    partitions: list[str],
    writers: int,
    commits: int,
) -> dict[str, Any]:
    factory = make_session_factory(make_engine(db_url, pool_size=2))
    clients = [Client(url, base_path, root) for _ in range(writers)]
    before = metric(url, "tms_view_storage_listings_total")
    latencies = []
    start = 10_000_000
    for round_ in range(commits):
        instant = writer.insert(batch(start + round_ * 40, 40, len(partitions), 2 + round_))
        with factory() as session:
            record_commits(
                session, [CommitIn(tbl_id=tbl_id, instant=instant, action="deltacommit")]
            )
            session.commit()
        for client in clients:
            client.reload()
            for p in partitions:
                t = time.perf_counter()
                client.latest_slices(p)
                latencies.append(time.perf_counter() - t)
    ours = metric(url, "tms_view_storage_listings_total") - before
    alone = commits * writers * (1 + len(partitions))
    saved = metric(url, "tms_view_listings_saved_total")
    return {
        "rounds": commits,
        "writers": writers,
        "listings_without_tms": alone,
        "listings_with_tms": ours,
        "listings_ratio": ratio(alone, ours),
        "listings_goal": goal(ratio(alone, ours), 20.0, at_least=True),
        "latency_during_writes_ms": percentiles(latencies),
        "listings_saved_total": saved,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file-groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--table-version", type=int, default=6)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()

    with fresh_database("tms_bench_view", keep=args.keep_db) as db:
        root = Path(tempfile.mkdtemp(prefix="tms-bench-view-")) / "view_bench"
        log(f"writing {args.file_groups} file groups in {args.partitions} partitions")
        t = time.perf_counter()
        writer = write_table(root, args.file_groups, args.partitions, args.table_version)
        log(f"written in {time.perf_counter() - t:.1f}s")
        factory = make_session_factory(make_engine(db.url, pool_size=2))
        with factory() as session:
            tbl = register_table(
                session, db_name="bench", table_name="view_bench", base_path=str(root)
            ).table
            tbl_id = tbl.id
            session.commit()
        partitions = [f"p{i:02d}" for i in range(args.partitions)]
        groups = len(FileSystemView.build(writer.storage, writer.table.timeline()).file_groups)
        base_path = f"file:{root}"
        with api_server(db.url) as server:
            log("reads")
            reads = measure_reads(
                server.url, base_path, root, partitions, args.requests, args.clients
            )
            log(f"reads: {reads['tms_latency_ms']} vs direct {reads['direct_latency_ms']}")
            log("writes")
            writes = measure_writes(
                server.url,
                db.url,
                tbl_id,
                writer,
                base_path,
                root,
                partitions,
                args.writers,
                args.commits,
            )
            log(f"writes: {writes['listings_without_tms']} vs {writes['listings_with_tms']}")
        emit(
            {
                "benchmark": "view",
                "file_groups": groups,
                "partitions": args.partitions,
                "table_version": args.table_version,
                "reads": reads,
                "writes": writes,
                "machine": machine(db),
            },
            args.json_out,
        )


if __name__ == "__main__":
    main()
