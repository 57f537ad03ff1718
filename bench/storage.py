"""Storage requests on S3 of one notification, one pull, one compaction and one clean.

Starts moto's S3 server on a free port (a real S3 endpoint, reached over HTTP by s3fs),
writes a merge-on-read table of `--file-groups` file groups (default 100; each a base file
and one or two log files) with the project's writer, and counts the requests of:

1. notification: the storage work of a commit callback. With the action in the payload
   (or log files in the write stats) and the table registered it reads no storage; a
   released writer's callback without either makes the callback read the action from
   the timeline (`TableProbe.action_of`), which is what is measured;
2. pull: the timeline-only read of a pull fallback (`HudiTable.open` + `timeline()`);
3. compaction: `schedule_compaction` + `execute_compaction` on Spark local;
4. clean: `schedule_clean` (KEEP_LATEST_COMMITS, retained=1) + `execute_clean` after it.

Two counts per work: `tms`, what `Storage` records inside `counting()` (Spark tasks'
included, the figures the service exports), and `wire`, the requests the S3 server
received (LIST = ListObjects, a multipart upload's parts count as PUTs, a DeleteObjects
batch as one DELETE). The lower bound comes from the work's own inputs and outputs in the
same run: one GET per input file and per timeline file it must read (`hoodie.properties`
included), one PUT per file it writes (data and timeline files), one DELETE per file it
removes, one LIST per partition it must discover and one of the timeline folder. Goal:
ratio to the bound at most 1.5. `--by-path` shows where the wire requests went.

    .venv/bin/python bench/storage.py [--file-groups 100] [--table-version 8]
        [--master local[2]] [--by-path] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pyarrow as pa

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from bench.common import emit, free_port, log, machine
from tms.hudi.avro import codec as avro_codec
from tms.hudi.properties import PROPERTIES_PATH
from tms.hudi.storage import Storage
from tms.hudi.storage.requests import RequestKind, counting
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.timeline import Timeline
from tms.ingest.probe import TableProbe
from tms.services.clean.execute import execute_clean, schedule_clean
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.spark_runtime import get_spark
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

KINDS = tuple(kind.value for kind in RequestKind)
CITIES = ("amsterdam", "berlin", "chennai", "denver")
BUCKET = "bench"
ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
GOAL = 1.5
BATCH_DELETE = "?delete"


# The S3 server and its request log -------------------------------------------------------


@dataclass
class WireLog:
    """Requests the S3 server received, per kind and per (kind, path class)."""

    kinds: Counter[str] = field(default_factory=Counter)
    paths: Counter[tuple[str, str]] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, key: str) -> None:
        with self.lock:
            self.kinds[kind] += 1
            self.paths[(kind, path_class(key))] += 1

    def snapshot(self) -> tuple[Counter[str], Counter[tuple[str, str]]]:
        with self.lock:
            return Counter(self.kinds), Counter(self.paths)


def s3_kind(method: str, key: str, query: Mapping[str, list[str]]) -> str:
    """The billing class of one S3 request (path-style URL: `/bucket/key?query`)."""
    if method == "HEAD":
        return RequestKind.HEAD.value
    if method == "DELETE" or (method == "POST" and "delete" in query):
        return RequestKind.DELETE.value
    if method in ("PUT", "POST"):
        return RequestKind.PUT.value  # objects, multipart create/parts/complete
    return RequestKind.LIST.value if not key else RequestKind.GET.value


def path_class(key: str) -> str:
    """What a key (or a listing's prefix) is to a Hudi table, for the breakdown."""
    if key == BATCH_DELETE:
        return "DeleteObjects batch"
    name = key.rsplit("/", 1)[-1]
    if "/.hoodie/.temp/" in f"/{key}/":
        return "marker"
    if "/.hoodie/.heartbeat/" in f"/{key}/":
        return "heartbeat"
    if "/.hoodie/.aux/" in f"/{key}/":
        return "aux (bootstrap index)"
    if name == "hoodie.properties":
        return "hoodie.properties"
    if "/.hoodie/" in f"/{key}/":
        return "timeline"
    if name.endswith(".parquet"):
        return "base file"
    if ".log." in name:
        return "log file"
    if name.startswith(".hoodie_partition_metadata"):
        return "partition metadata"
    return "partition or root"


class CountingMotoServer(ThreadedMotoServer):
    """moto's threaded S3 server with every request noted in `wire` before it is served."""

    def __init__(self, port: int, wire: WireLog) -> None:
        super().__init__(ip_address="127.0.0.1", port=port, verbose=False)
        self.wire = wire

    def application(self) -> Callable[..., Any]:
        """moto's WSGI application, noting each request in `wire` before serving it."""
        app = DomainDispatcherApplication(create_backend_app)
        wire = self.wire

        def counted(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            path = environ.get("PATH_INFO", "").lstrip("/")
            _, _, key = path.partition("/")
            query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
            kind = s3_kind(environ["REQUEST_METHOD"], key, query)
            if "delete" in query and not key:
                wire.add(kind, BATCH_DELETE)
            else:
                wire.add(kind, key or (query.get("prefix") or [""])[0])
            return app(environ, start_response)

        return counted

    def _server_entry(self) -> None:
        self._server = make_server(
            self._ip_address,
            self._port,
            self.application(),
            True,
            request_handler=MotoRequestHandler,
        )
        self._server_ready_event.set()
        self._server.serve_forever()

    @property
    def port(self) -> int:
        return self._port


# Measuring one piece of work -------------------------------------------------------------


@dataclass
class Measured:
    """The requests of one piece of work and its lower bound, per kind."""

    work: str
    tms: dict[str, int]
    wire: dict[str, int]
    bound: dict[str, int]
    note: str = ""
    wire_paths: dict[str, int] = field(default_factory=dict)

    def row(self, counts: dict[str, int]) -> dict[str, Any]:
        total, bound = sum(counts.values()), sum(self.bound.values())
        return {
            **counts,
            "total": total,
            "bound": bound,
            "ratio": round(total / bound, 2) if bound else None,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "tms": self.row(self.tms),
            "wire": self.row(self.wire),
            "bound": self.bound,
            "note": self.note,
            "wire_by_path": self.wire_paths,
        }


@dataclass
class Counts:
    tms: dict[str, int] = field(default_factory=dict)
    wire: dict[str, int] = field(default_factory=dict)
    wire_paths: dict[str, int] = field(default_factory=dict)


@contextmanager
def measured(wire: WireLog) -> Iterator[Counts]:
    """The requests made inside the block, as `Storage` counts them and as S3 received them."""
    kinds_before, paths_before = wire.snapshot()
    out = Counts()
    with counting() as counts:
        yield out
    kinds_after, paths_after = wire.snapshot()
    out.tms = counts.as_dict()
    out.wire = {kind: kinds_after[kind] - kinds_before[kind] for kind in KINDS}
    paths = paths_after - paths_before
    out.wire_paths = {f"{k} {p}": n for (k, p), n in sorted(paths.items()) if n}


def bound(*, lists: int = 0, gets: int = 0, puts: int = 0, deletes: int = 0) -> dict[str, int]:
    return {"LIST": lists, "HEAD": 0, "GET": gets, "PUT": puts, "DELETE": deletes}


# The table --------------------------------------------------------------------------------


def rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([f"key-{i:06d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": pa.array([CITIES[i % len(CITIES)] for i in ids]),
            "fare": pa.array([float(i % 97) for i in ids]),
        }
    )


def build_table(base: str, file_groups: int, rows_per_file: int, table_version: int) -> None:
    """`file_groups` file groups over the cities, each a base file and one log file, and a
    second log file in about half of them (the first half of the keys updated again)."""
    table = create_table(
        base,
        "bench_storage",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=rows_per_file)
    ids = list(range(file_groups * rows_per_file))
    writer.insert(rows(ids, 1))
    writer.upsert(rows(ids, 2))
    writer.upsert(rows(ids[: len(ids) // 2], 3))


def instant_files(timeline: Timeline, instant_time: str) -> int:
    """Timeline files of one instant (its requested, inflight and completed states)."""
    return sum(len(timeline.files.get(key, {})) for key in timeline.files if key[0] == instant_time)


# The four works ---------------------------------------------------------------------------


def notification(base: str, wire: WireLog) -> Measured:
    """A callback that names no action and whose write stats show no log file: the probe
    reads the action from the timeline. Bound: `hoodie.properties` and the timeline listing
    (the action is in the instant's file name)."""
    instant_time = HudiTable.open(base).timeline().instants[-1].requested_time
    with measured(wire) as counts:
        action = TableProbe(base).action_of(instant_time)
    assert action is not None
    return Measured(
        "notification (action from the timeline)",
        counts.tms,
        counts.wire,
        timeline_read_bound(),
        "with the action in the payload or log files in the write stats, and the table "
        "registered, a callback makes no storage request (0 of each kind)",
        counts.wire_paths,
    )


def pull(base: str, wire: WireLog) -> Measured:
    """The timeline-only read: `hoodie.properties` and one listing of the timeline folder."""
    with measured(wire) as counts:
        HudiTable.open(base).timeline()
    return Measured("pull (open + timeline)", counts.tms, counts.wire, timeline_read_bound())


def timeline_read_bound() -> dict[str, int]:
    """GET `hoodie.properties`, LIST the timeline folder: instants are named by their files."""
    return bound(gets=1, lists=1)


def compaction(spark: Any, base: str, wire: WireLog) -> Measured:
    with measured(wire) as counts:
        instant_time = schedule_compaction(HudiTable.open(base))
        assert instant_time is not None, "nothing to compact"
        result = execute_compaction(spark, HudiTable.open(base), instant_time)
    timeline = HudiTable.open(base).timeline()
    instant = timeline.get(instant_time)
    assert instant is not None and instant.is_completed
    plan = timeline.compaction_plan(instant)
    written = timeline.commit_metadata(instant).partition_to_write_stats
    partitions = table_partitions(timeline)
    operations = plan.get("operations") or []
    logs = Counter(len(op.get("deltaFilePaths") or []) for op in operations)
    return Measured(
        f"compaction ({len(operations)} file groups)",
        counts.tms,
        counts.wire,
        compaction_bound(
            plan,
            timeline_files=instant_files(timeline, instant_time),
            files_written=sum(map(len, written.values())),
            partitions=len(partitions),
        ),
        f"{result.files_written} base files written from {plan_inputs(plan)} input files "
        f"(file groups by log files: {dict(sorted(logs.items()))}) in "
        f"{len(partitions)} partitions",
        counts.wire_paths,
    )


def plan_inputs(plan: Mapping[str, Any]) -> int:
    """Files a compaction plan reads: each operation's base file (if any) and log files."""
    return sum(
        bool(op.get("dataFilePath")) + len(op.get("deltaFilePaths") or [])
        for op in plan.get("operations") or []
    )


def compaction_bound(
    plan: Mapping[str, Any], *, timeline_files: int, files_written: int, partitions: int
) -> dict[str, int]:
    """GET `hoodie.properties`, the plan, the commit holding the schema and every input
    file; PUT the instant's timeline files and the new base files; LIST the timeline folder
    and each partition, where the slices with log files are found."""
    return bound(
        gets=1 + 1 + 1 + plan_inputs(plan),
        puts=timeline_files + files_written,
        lists=1 + partitions,
    )


def table_partitions(timeline: Timeline) -> set[str]:
    """Partitions written by the completed commits on the timeline."""
    found: set[str] = set()
    for instant in timeline.completed((Action.COMMIT, Action.DELTA_COMMIT)):
        found |= set(timeline.commit_metadata(instant).partition_to_write_stats)
    return found


def clean(spark: Any, base: str, wire: WireLog) -> Measured:
    """The slices the compaction replaced, deleted: a delta commit after the compaction
    (outside the count) makes the compaction's commit the newest older than the one retained."""
    HudiWriter.open(base).upsert(rows([0], 4))
    with measured(wire) as counts:
        instant_time = schedule_clean(HudiTable.open(base), retained=1)
        assert instant_time is not None, "nothing to clean"
        result = execute_clean(spark, HudiTable.open(base), instant_time)
    timeline = HudiTable.open(base).timeline()
    instant = timeline.get(instant_time)
    assert instant is not None and instant.is_completed
    metadata = avro_codec.decode(timeline.read_instant(instant, State.COMPLETED))
    partitions = len(metadata["partitionMetadata"])
    return Measured(
        "clean (retained=1)",
        counts.tms,
        counts.wire,
        clean_bound(metadata, timeline_files=instant_files(timeline, instant_time)),
        f"{result.files_deleted} files deleted in {partitions} partitions",
        counts.wire_paths,
    )


def clean_bound(metadata: Mapping[str, Any], *, timeline_files: int) -> dict[str, int]:
    """GET `hoodie.properties` and the plan; PUT the instant's timeline files; DELETE each
    file deleted (as Hudi's cleaner does, one by one); LIST the timeline folder and each
    partition cleaned."""
    partitions = metadata.get("partitionMetadata") or {}
    deleted = sum(len(p.get("successDeleteFiles") or []) for p in partitions.values())
    return bound(gets=2, puts=timeline_files, deletes=deleted, lists=1 + len(partitions))


# Report -----------------------------------------------------------------------------------


def table_text(works: list[Measured]) -> str:
    head = "| work | count | " + " | ".join(KINDS) + " | total | bound | ratio |"
    lines = [head, "|" + "---|" * (len(KINDS) + 5)]
    for work in works:
        for source, counts in (("tms", work.tms), ("wire", work.wire)):
            row = work.row(counts)
            ratio = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}"
            cells = " | ".join(str(row[k]) for k in KINDS)
            lines.append(
                f"| {work.work} | {source} | {cells} | {row['total']} | {row['bound']} | {ratio} |"
            )
        bounds = " | ".join(str(work.bound[k]) for k in KINDS)
        lines.append(f"| {work.work} | bound | {bounds} | {sum(work.bound.values())} | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file-groups", type=int, default=100)
    parser.add_argument("--rows-per-file", type=int, default=10)
    parser.add_argument("--table-version", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--by-path", action="store_true", help="wire requests per path class")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()

    # moto's access log, every request, with BENCH_S3_LOG=1
    access_log = logging.INFO if os.environ.get("BENCH_S3_LOG") else logging.ERROR
    logging.getLogger("werkzeug").setLevel(access_log)
    wire = WireLog()
    server = CountingMotoServer(free_port(), wire)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update({**ENVIRONMENT, "AWS_ENDPOINT_URL": f"http://{host}:{port}"})
    Storage(f"s3://{BUCKET}").fs.mkdir(BUCKET)
    base = f"s3://{BUCKET}/trips-{uuid.uuid4().hex[:8]}"
    log(f"writing {args.file_groups} file groups at {base}")
    build_table(base, args.file_groups, args.rows_per_file, args.table_version)
    assert Storage(base).exists(PROPERTIES_PATH)

    spark = get_spark(args.master, app_name="tms-bench-storage")
    aws = {name: value for name, value in os.environ.items() if name.startswith("AWS_")}
    spark.sparkContext.environment.update(aws)  # Spark tasks open the table by URI
    spark.sparkContext.parallelize(range(2), 2).map(lambda x: x).collect()  # start workers

    log("notification, pull")
    works = [notification(base, wire), pull(base, wire)]
    log("compaction")
    works.append(compaction(spark, base, wire))
    log("clean")
    works.append(clean(spark, base, wire))
    spark.stop()
    server.stop()

    print(table_text(works))
    for work in works:
        if work.note:
            print(f"- {work.work}: {work.note}")
        if args.by_path:
            for name, n in work.wire_paths.items():
                print(f"    {n:5d}  {name}")
    figures = {
        "machine": machine(),
        "master": args.master,
        "table_version": args.table_version,
        "goal_ratio": GOAL,
        "works": {work.work: work.to_dict() for work in works},
    }
    if args.json_out:
        emit(figures, args.json_out)


if __name__ == "__main__":
    main()
