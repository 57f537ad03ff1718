"""The services on a flaky object store: moto's S3 server behind `bench.fault_proxy`, failing
1 %, 5 % and 20 % of requests (500, 503 SlowDown, resets, stalls past the read timeout,
cut-short bodies), every request of the driver and of the Spark tasks going through it.

Per rate, on a fresh merge-on-read table with a metadata table (written with no faults):
the pull (open + timeline), the callback's probe (`TableProbe.action_of`), the view's
listing (`tms.view.listing.list_table`), timeline-server markers (created over HTTP on a
`tms` API process whose storage calls go through the proxy, `MARKER_BATCH` concurrent
creates per operation, a create refused with a 5xx sent again as Hudi's writer does), then
compaction, clustering, metadata-table compaction (when one is due), an index build (the
record index) and clean on Spark, as `table_service(action)` schedules and executes them.
An operation that fails is run again (a job's retry: the pending plan is executed again),
at most `--attempts` times. Afterwards, with faults off, the table must read the same rows
through hudi-rs, every pending plan must be gone, every marker must be on storage, and
every key's record index entry must name its file group.

Per operation kind: operations completed, operations that met a fault (and got through),
attempts failed (run again), operations failed for good, the requests the proxy received
and the faults it injected; storage retries of the driver (`RETRIED`; those of Spark tasks
happen in their worker processes and show as requests).

    .venv/bin/python bench/flaky_store.py [--rates 0.01,0.05,0.2] [--rounds 20]
        [--markers 200] [--file-groups 12] [--retries N] [--master local[2]] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    api_server,
    emit,
    free_port,
    fresh_database,
    log,
    machine,
    postgres_server,
)
from bench.fault_proxy import FAULT_KINDS, FaultProxy
from bench.storage import CITIES, ENVIRONMENT, CountingMotoServer, WireLog, rows
from tms.hudi.files import timeline_markers
from tms.hudi.meta_fields import META_FIELDS, RECORD_KEY
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import Storage
from tms.hudi.storage.retry import RETRIED
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import request, transition
from tms.ingest.probe import TableProbe
from tms.services.registry import table_service
from tms.spark_runtime import get_spark
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter
from tms.view.listing import list_table

BUCKET = "flaky"
RETRY_ENVIRONMENT = {
    "TMS_STORAGE_RETRIES": "6",
    "TMS_STORAGE_RETRY_BASE_SECONDS": "0.05",
    "TMS_STORAGE_RETRY_MAX_SECONDS": "1.0",
    "TMS_STORAGE_READ_TIMEOUT_SECONDS": "2.0",
}
"""The retry settings of the run (shorter waits than the defaults, so a run takes minutes);
stalls last `STALL_SECONDS`, past the read timeout."""
STALL_SECONDS = 3.0
SERVICES = ("compaction", "clustering", "metadata-compaction", "indexing", "clean")
PLANNING = {"indexing": {"partitions": "record_index"}}
"""What a service plans beyond the defaults: the index build builds the record index."""
INSTANT = "20260101120000000"
"""The write instant the markers are created for (made pending, and removed after)."""
MARKER_BATCH = 20
MARKER_SENDS = 10
"""How often a marker create refused with a 5xx is sent before the batch counts as failed."""
MARKER_ROUTES = "/v1/hoodie/marker"
MARKER_CREATE = f"{MARKER_ROUTES}/create"


@dataclass
class Tally:
    """One kind of operation at one rate."""

    completed: int = 0
    met_faults: int = 0
    attempts_failed: int = 0
    failed: int = 0
    nothing_to_do: int = 0
    requests: int = 0
    storage_retries: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "completed": self.completed,
            "met_faults": self.met_faults,
            "attempts_failed": self.attempts_failed,
            "failed": self.failed,
            "nothing_to_do": self.nothing_to_do,
            "requests": self.requests,
            "storage_retries_driver": self.storage_retries,
            "faults": dict(self.faults),
            "errors": self.errors[:5],
        }


class Run:
    """The operations of one rate, each measured at the proxy."""

    def __init__(self, proxy: FaultProxy, attempts: int) -> None:
        self.proxy = proxy
        self.attempts = attempts
        self.tallies: dict[str, Tally] = {}

    def operation(self, kind: str, work: Callable[[], bool]) -> None:
        """`work` run until it returns (at most `attempts` tries); it returns False when
        there was nothing to do."""
        tally = self.tallies.setdefault(kind, Tally())
        requests, faults, retried = self.proxy.requests(), self.proxy.faults(), RETRIED.total
        done: bool | None = None
        for _ in range(self.attempts):
            try:
                done = work()
                break
            except Exception as exc:  # every failure is a figure here
                tally.attempts_failed += 1
                tally.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
        met = self.proxy.faults() - faults
        tally.requests += self.proxy.requests() - requests
        tally.storage_retries += RETRIED.total - retried
        tally.faults += met
        if done is None:
            tally.failed += 1
        elif not done:
            tally.nothing_to_do += 1
        else:
            tally.completed += 1
            tally.met_faults += bool(met)


def build_table(base: str, file_groups: int, rows_per_file: int) -> None:
    table = create_table(
        base,
        "flaky",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=8,
        metadata_partitions=["files"],
    )
    writer = HudiWriter(table, max_file_rows=rows_per_file)
    ids = list(range(file_groups * rows_per_file))
    writer.insert(rows(ids, 1))
    writer.upsert(rows(ids, 2))
    writer.upsert(rows(ids[: len(ids) // 2], 3))


def snapshot_rows(base: str, endpoint: str) -> pa.Table:
    """hudi-rs's snapshot (the independent reader), straight from the S3 server."""
    read = hudi_rs_read(base, endpoint)
    keep = [RECORD_KEY] + [c for c in read.column_names if c not in META_FIELDS]
    return read.select(keep).sort_by(RECORD_KEY)


def hudi_rs_read(base: str, endpoint: str) -> pa.Table:
    """Every row with its meta fields, as hudi-rs reads it straight from the S3 server."""
    from hudi import HudiTable as OracleTable

    options = {
        "aws_endpoint_url": endpoint,
        "aws_allow_http": "true",
        "aws_access_key_id": ENVIRONMENT["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
        "aws_region": ENVIRONMENT["AWS_REGION"],
    }
    return pa.Table.from_batches(OracleTable(base, options).read())


def reads(run: Run, base: str, rounds: int) -> None:
    with run.proxy.no_faults():  # what the probe must find
        last = HudiTable.open(base).timeline().instants[-1]

    def pull() -> bool:
        HudiTable.open(base).timeline()
        return True

    def probe() -> bool:
        if TableProbe(base).action_of(last.requested_time) != last.action:
            raise AssertionError("the probe read another action")
        return True

    def view() -> bool:
        list_table(Storage(base))
        return True

    for _ in range(rounds):
        run.operation("pull", pull)
        run.operation("callback probe", probe)
        run.operation("view listing", view)


def markers(run: Run, base: str, count: int, api: str) -> tuple[list[str], Counter[int]]:
    """Markers created over the timeline server's routes (`POST /v1/hoodie/marker/create`,
    as `TimelineServerBasedWriteMarkers` sends it), `MARKER_BATCH` at a time from as many
    threads as an executor's tasks, for a write instant made pending first (with no
    faults). A create answered with a 5xx is sent again, as Hudi's writer retries it;
    returns the names and the statuses of the refusals sent again."""
    storage = Storage(base)
    with run.proxy.no_faults():  # the writer's instant
        table = HudiTable.open(base)
        pending = transition(
            storage,
            table.config,
            request(storage, table.config, INSTANT, Action.DELTA_COMMIT),
            State.INFLIGHT,
        )
    marker_dir = f"{base}/.hoodie/.temp/{INSTANT}"
    names = [
        f"{CITIES[i % 4]}/{i:08d}-0_0-1-0_{INSTANT}.parquet.marker.CREATE" for i in range(count)
    ]
    refused: Counter[int] = Counter()
    with httpx.Client(base_url=api, timeout=60.0) as http:

        def create(name: str) -> None:
            params = {"markerdirpath": marker_dir, "markername": name}
            for _ in range(MARKER_SENDS):
                answer = http.post(MARKER_CREATE, params=params)
                if answer.status_code == 200:
                    return
                if answer.status_code < 500:
                    raise AssertionError(f"{answer.status_code}: {answer.text[:200]}")
                refused[answer.status_code] += 1
            raise AssertionError(f"{name}: refused {MARKER_SENDS} times")

        def batch(chunk: list[str]) -> bool:
            with ThreadPoolExecutor(MARKER_BATCH) as pool:
                list(pool.map(create, chunk))
            return True

        for start in range(0, count, MARKER_BATCH):
            run.operation(
                "markers over HTTP (batch of 20)",
                lambda c=names[start : start + MARKER_BATCH]: batch(c),
            )
        with run.proxy.no_faults():
            listed = http.get(f"{MARKER_ROUTES}/all", params={"markerdirpath": marker_dir})
    served = set(listed.json()) if listed.status_code == 200 else set()
    if served != set(names):
        log(f"the server lists {len(served & set(names))} of {len(names)} markers")
    # the write ends without a commit, as an aborted writer's would; the services run next
    with run.proxy.no_faults():
        for state in (State.INFLIGHT, State.REQUESTED):
            storage.delete(table.timeline().instant_path(pending, state))
    return names, refused


def service(run: Run, spark: Any, base: str, action: str, retain: int = 1) -> None:
    entry = table_service(action)
    params = {"retained": retain, **PLANNING.get(action, {})}

    def work() -> bool:
        table = HudiTable.open(base)
        pending = entry.pending_plans(table)
        instant = pending[0] if pending else entry.schedule(table, params)
        if instant is None:
            return False
        entry.execute(spark, HudiTable.open(base), instant, 30.0)
        return True

    run.operation(action, work)


def one_rate(
    proxy: FaultProxy, spark: Any, direct: str, api: str, rate: float, args: argparse.Namespace
) -> dict[str, Any]:
    name = f"trips-{uuid.uuid4().hex[:8]}"
    base = f"s3://{BUCKET}/{name}"
    proxy.set_rate(0.0)
    build_table(base, args.file_groups, args.rows_per_file)
    registered = httpx.post(
        f"{api}/v1/hoodie/service/register",
        json={"db_name": "bench", "table_name": name, "base_path": base},
        timeout=60.0,
    )
    registered.raise_for_status()
    before = snapshot_rows(base, direct)
    run = Run(proxy, args.attempts)
    started = time.monotonic()
    proxy.set_rate(rate)
    log(f"rate {rate:.0%}: reads")
    reads(run, base, args.rounds)
    log(f"rate {rate:.0%}: markers")
    names, refused = markers(run, base, args.markers, api)
    unchanged = True
    for action in SERVICES:
        log(f"rate {rate:.0%}: {action}")
        if action == "clean":
            with proxy.no_faults():  # a writer's commit, so the clean has slices to delete
                unchanged = snapshot_rows(base, direct).equals(before)
                HudiWriter.open(base).upsert(rows([0], 4))
                before = snapshot_rows(base, direct)
        service(run, spark, base, action)
    proxy.set_rate(0.0)
    seconds = time.monotonic() - started
    unchanged = unchanged and snapshot_rows(base, direct).equals(before)
    table = HudiTable.open(base)
    pending = {a: table_service(a).pending_plans(table) for a in SERVICES}
    indexed = record_index_matches(table, base, direct)
    on_store = timeline_markers.read_marker_files(Storage(base), INSTANT)
    stored = {n for found in on_store.values() for n in found}
    return {
        "rate": rate,
        "seconds": round(seconds, 1),
        "rows_unchanged": unchanged,
        "pending_plans_left": {a: p for a, p in pending.items() if p},
        "markers_on_storage": f"{len(stored & set(names))}/{len(names)}",
        "marker_creates_refused_and_sent_again": dict(refused),
        "record_index": indexed,
        "operations": {kind: tally.as_dict() for kind, tally in run.tallies.items()},
    }


def record_index_matches(table: HudiTable, base: str, endpoint: str) -> str:
    """The record index's entries against the table's rows read by hudi-rs: `n/n` when
    every key's entry names the file group that holds it."""
    if "record_index" not in table.config.metadata_partitions:
        return "not built"
    read = hudi_rs_read(base, endpoint)
    keys = read.column(RECORD_KEY).to_pylist()
    names = read.column("_hoodie_file_name").to_pylist()
    groups = [name.lstrip(".").split("_", 1)[0] for name in names]
    found = MetadataTableReader.open(table.storage).record_locations(keys)
    right = sum(
        1 for key, group in zip(keys, groups, strict=True) if _group(found.get(key)) == group
    )
    return f"{right}/{len(keys)}"


def _group(location: Any) -> str | None:
    return None if location is None else str(location.file_id)


def table_text(results: list[dict[str, Any]]) -> str:
    head = (
        "| rate | operation | completed | met a fault | attempts failed (run again) | "
        "failed | requests | faults injected | driver retries |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        for kind, t in result["operations"].items():
            faults = sum(t["faults"].values())
            completed = str(t["completed"]) + (
                f" (+{t['nothing_to_do']} nothing to do)" if t["nothing_to_do"] else ""
            )
            lines.append(
                f"| {result['rate']:.0%} | {kind} | {completed} | {t['met_faults']} | "
                f"{t['attempts_failed']} | {t['failed']} | {t['requests']} | {faults} | "
                f"{t['storage_retries_driver']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0.01,0.05,0.2")
    parser.add_argument("--rounds", type=int, default=20, help="pulls, probes, view listings")
    parser.add_argument("--markers", type=int, default=200)
    parser.add_argument("--file-groups", type=int, default=12)
    parser.add_argument("--rows-per-file", type=int, default=20)
    parser.add_argument("--attempts", type=int, default=3, help="tries of one operation")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument(
        "--retries", type=int, default=None, help="TMS_STORAGE_RETRIES (0: no retries at all)"
    )
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = CountingMotoServer(free_port(), WireLog())
    server.start()
    host, port = server.get_host_and_port()
    direct = f"http://{host}:{port}"
    proxy = FaultProxy(direct, stall_seconds=STALL_SECONDS, seed=args.seed).start()
    if args.retries is not None:
        RETRY_ENVIRONMENT["TMS_STORAGE_RETRIES"] = str(args.retries)
    os.environ.update({**ENVIRONMENT, **RETRY_ENVIRONMENT, "AWS_ENDPOINT_URL": proxy.url})
    Storage(f"s3://{BUCKET}").fs.mkdir(BUCKET)

    spark = get_spark(args.master, app_name="tms-bench-flaky-store")
    shipped = {n: v for n, v in os.environ.items() if n.startswith(("AWS_", "TMS_STORAGE_"))}
    spark.sparkContext.environment.update(shipped)  # Spark tasks open the table by URI
    spark.sparkContext.parallelize(range(2), 2).map(lambda x: x).collect()

    with (
        postgres_server(),
        fresh_database("tms_bench_flaky") as db,
        # the timeline server's process: its storage calls go through the proxy too
        api_server(db.url, settings=RETRY_ENVIRONMENT) as timeline_server,
    ):
        api = timeline_server.url
        results = [
            one_rate(proxy, spark, direct, api, float(rate), args) for rate in args.rates.split(",")
        ]
    spark.stop()
    proxy.stop()
    server.stop()

    print(table_text(results))
    for result in results:
        print(
            f"- {result['rate']:.0%}: {result['seconds']} s; rows unchanged: "
            f"{result['rows_unchanged']}; pending plans left: "
            f"{result['pending_plans_left'] or 'none'}; markers on storage: "
            f"{result['markers_on_storage']}; record index entries right: "
            f"{result['record_index']}; marker creates refused and sent again: "
            f"{result['marker_creates_refused_and_sent_again'] or 'none'}"
        )
    figures = {
        "machine": machine(),
        "master": args.master,
        "retry_settings": RETRY_ENVIRONMENT,
        "stall_seconds": STALL_SECONDS,
        "fault_kinds": FAULT_KINDS,
        "results": results,
    }
    if args.json_out:
        emit(figures, args.json_out)


if __name__ == "__main__":
    main()
