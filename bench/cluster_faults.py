"""Every table service on a Spark standalone cluster that loses a worker while tasks run.

A master and two one-core workers run on this machine as processes of their own (the Spark
PySpark ships; `tests.spark_cluster`), `tms serve` (`tests.e2e.conftest.Service`) points
`TMS_SPARK_MASTER` at them, and each engine (spark-submit jobs; a resident worker) runs the
services one after the other on one merge-on-read table of version 9 with a metadata table:
compaction, clustering, clean, the metadata table's compaction (with the metadata clean
after it) and a record index build. In each, once a Spark task has written its files and
waits before reporting (`tms.testing.task_pause`), the worker running it is SIGKILLed with its
executor; then the task is released, a new worker joins, and the run is checked: the
operation completed, Spark ran the killed task again, the table reads the same through
hudi-rs (and the record index through our reader is true to the file slices), and no file
the killed attempt wrote is committed or left on storage, nor any marker.

    .venv/bin/python bench/cluster_faults.py                  # ≈ 10 min on 2 cores
    .venv/bin/python bench/cluster_faults.py --engines spark-worker --services compaction
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the checkout's root, for bench and tests
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import oracle
from tests.e2e.conftest import TERMINAL, TEST_SETTINGS, Service
from tests.e2e.test_marker_attack import WORKER, written_table
from tests.e2e.test_service_e2e import trips
from tests.hudi.test_indexing import record_index_is_true
from tests.spark_cluster import (
    PausedTask,
    SparkCluster,
    committed_files,
    table_files,
    written_by,
)

from bench.common import emit, fresh_database, log, machine, postgres_server
from tms.testing.sample_writer.writer import HudiWriter

ENGINES: dict[str, dict[str, str]] = {
    "spark-submit": {},
    "spark-worker": {key: str(value) for key, value in WORKER.items()},
}
SERVICES: dict[str, tuple[str, dict[str, Any]]] = {
    "compaction": ("compact", {}),
    "clustering": ("cluster", {}),
    "clean": ("clean", {"extra_params": {"policy": "KEEP_LATEST_FILE_VERSIONS", "retained": 1}}),
    "metadata-compaction": ("metadata-compaction", {}),
    "index": ("index", {"extra_params": {"partitions": "record_index"}}),
    # Hudi's own compaction (its Spark bundle on the executors): its tasks are Java, which
    # never pause, so no worker is killed; new log files are written first.
    "compaction-hudi": ("compact", {"executor": "hudi"}),
}
RUN_TIMEOUT = 600.0


@dataclass
class Row:
    engine: str
    service: str
    status: str = "not run"
    executed_by: str = ""
    """Whose code ran the plan: `native` (tms's tasks) or `hudi`."""
    attempts: int = 0
    paused: bool = False
    """A task reached the pause and its worker was killed."""
    tasks_rerun: int = 0
    reads_right: bool = False
    killed_files_written: int = -1
    """Files the killed task attempt had written when its worker was killed."""
    killed_files_left: int = -1
    """Files the killed task attempt wrote, left on storage (outside markers)."""
    killed_files_committed: int = -1
    """Files the killed task attempt wrote, named by a completed commit."""
    markers_left: int = -1
    """Marker files the run left (of the table and its metadata table)."""
    seconds: float = 0.0
    error: str = ""


def marker_files(base: str) -> set[Path]:
    """Marker files of the table and of its metadata table."""
    folders = [Path(base) / ".hoodie" / ".temp", Path(base) / ".hoodie/metadata/.hoodie/.temp"]
    return {p for folder in folders if folder.is_dir() for p in folder.rglob("*") if p.is_file()}


def run_service(
    service: Service, cluster: SparkCluster, writer: HudiWriter, row: Row, name: str
) -> None:
    route, body = SERVICES[name]
    base = writer.table.base_path
    if name == "compaction-hudi":
        writer.upsert(trips(range(0, 600, 5), ts=4))
    before = oracle.snapshot(base)
    markers_before, files_before = marker_files(base), table_files(base)
    cluster.hold()
    started = time.monotonic()
    submitted = service.post(
        f"/v1/hoodie/service/{route}/submit",
        {"db_name": "lake", "table_name": "trips", **body},
    )
    operation_id = submitted["id"]
    killed: PausedTask | None = None

    def ended() -> bool:
        return service.operation(operation_id)["status"] in TERMINAL

    with contextlib.suppress(_Ended):  # the job ran no task that writes files
        killed = cluster.wait_for_paused_task(RUN_TIMEOUT, check=_raise_if(ended))
    killed_files: set[str] = set()
    if killed is not None:
        row.paused = True
        new_files = table_files(base) - files_before
        killed_files = {p for p in new_files if written_by(p, {killed.write_token})}
        cluster.kill_worker_of(killed)
    cluster.release()
    operation = service.wait_terminal(operation_id, RUN_TIMEOUT)
    row.seconds = round(time.monotonic() - started, 1)
    row.status = operation["status"]
    row.executed_by = operation.get("executed_by") or ""
    row.error = (operation["last_error"] or "").partition("\n")[0][:200]
    row.attempts = len(service.attempts(operation_id))
    if killed is not None:
        row.tasks_rerun = len(cluster.reruns(killed))
        cluster.start_worker()  # the lost machine replaced, for the next service
    reads_right = oracle.snapshot(base).to_pylist() == before.to_pylist()
    if name == "index" and reads_right:
        try:
            record_index_is_true(Path(base))
        except AssertionError:
            reads_right = False
    row.reads_right = reads_right
    row.killed_files_written = len(killed_files)
    row.killed_files_left = len(killed_files & table_files(base))
    row.killed_files_committed = len(killed_files & committed_files(base))
    row.markers_left = len(marker_files(base) - markers_before)


class _Ended(Exception):
    pass


def _raise_if(ended: Any) -> Any:
    def check() -> None:
        if ended():
            raise _Ended

    return check


@contextlib.contextmanager
def engine_setup(engine: str, root: Path) -> Iterator[tuple[Service, SparkCluster, HudiWriter]]:
    with fresh_database("cluster", keep=False) as db:
        cluster = SparkCluster(root / "spark")
        service: Service | None = None
        try:
            cluster.start()
            settings = {**TEST_SETTINGS, **ENGINES[engine], "spark_master": cluster.master_url}
            settings["lease_seconds"] = "60"
            service = Service(engine, db.url, root / "service", settings)
            service.start()
            writer = written_table(root, table_version=9, metadata=True)
            service.post(
                "/v1/hoodie/service/register",
                {"db_name": "lake", "table_name": "trips", "base_path": writer.table.base_path},
            )
            yield service, cluster, writer
        finally:
            if service is not None:
                service.close()
            cluster.close()


def table(rows: list[Row]) -> str:
    head = "| service | engine | executed by | completed | attempts | worker killed mid-task "
    head += "| tasks rerun "
    head += "| table reads right | killed task's files: written / left / committed "
    head += "| markers left | seconds |\n" + "|---" * 11 + "|"
    lines = [head]
    for r in rows:
        done = "yes" if r.status == "COMPLETED" else f"no ({r.status}: {r.error})"
        killed = f"{r.killed_files_written} / {r.killed_files_left} / {r.killed_files_committed}"
        if not r.paused:
            killed = "n/a"
        lines.append(
            f"| {r.service} | {r.engine} | {r.executed_by} | {done} | {r.attempts} | "
            f"{'yes' if r.paused else 'no'} | {r.tasks_rerun} | "
            f"{'yes' if r.reads_right else 'no'} | "
            f"{killed} | "
            f"{r.markers_left} | {r.seconds} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--services", default=",".join(SERVICES))
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    services = [s for s in args.services.split(",") if s]
    rows: list[Row] = []
    facts = machine()
    with postgres_server():
        run_engines(engines, services, rows)
    print(table(rows), file=sys.stderr)
    emit({"machine": facts, "rows": [asdict(r) for r in rows], "table": table(rows)}, args.json_out)
    return 0


def run_engines(engines: list[str], services: list[str], rows: list[Row]) -> None:
    for engine in engines:
        with tempfile.TemporaryDirectory(prefix=f"tms-cluster-{engine}-") as tmp:
            log(f"{engine}: starting a Spark master, two workers and tms serve")
            with engine_setup(engine, Path(tmp)) as (service, cluster, writer):
                for name in services:
                    row = Row(engine, name)
                    rows.append(row)
                    log(f"{engine}: {name}")
                    try:
                        run_service(service, cluster, writer, row, name)
                    except Exception as exc:  # reported in the table, the next one runs
                        row.error = f"{type(exc).__name__}: {exc}".partition("\n")[0][:200]
                    log(f"  {asdict(row)}")


if __name__ == "__main__":
    sys.exit(main())
