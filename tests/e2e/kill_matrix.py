"""A job SIGKILLed at each step of a table service, as the OOM killer or a lost node would,
and what the next attempt makes of it.

Each case: a fresh table with work for its service (`table_for`; versions 6 and 9, with or
without a metadata table) registered with a `tms serve` that runs its jobs by spark-submit
or in a resident worker and holds them at one step (`tms.testing.fault_pause`); once the
job is held there, its whole process group is killed, the hold is released, and the
operation must complete on a later attempt. Then: the rows hudi-rs and Hudi's own reader
(Hudi 1.2's Spark datasource) read are those each read before; the metadata table (where there
is one) agrees with the listing, as tms, hudi-rs and Hudi's own classes see them
(`tests.hudi_java.metadata_check`); no base file of an instant that did not complete and no
marker is left; the operation's attempts show the one that was lost.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests import oracle
from tests.e2e.conftest import Service, Services, kill_job_processes
from tests.hudi.test_fixture_views import rows_of, without_metadata_table
from tests.hudi.test_metadata_reader import committed_files_on_storage
from tests.hudi_java.support import HudiSpark
from tests.services.test_partition_ttl import Clock, frozen_clock
from tms.hudi.metadata.compaction import (
    execute_metadata_compaction,
    schedule_metadata_compaction,
)
from tms.hudi.metadata.listing import metadata_file_system_view
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.apache_hudi.executor import HUDI_STAGE
from tms.services.metadata.clean import METADATA_CLEANER_COMMITS_RETAINED
from tms.services.metadata.clean import STAGE_PREFIX as METADATA_STAGES
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter
from tms.testing.task_pause import TASKS_WRITING

STEPS: dict[str, str] = {
    "plan written": "starting Spark",
    "tasks writing": "tasks writing",
    "tasks done, before the metadata commit": "committing",
    "metadata committed, before the data commit": "metadata committed",
    "data committed, before the result": "committed",
}
"""Kill point → the job's step (`tms.testing.fault_pause`) held there, for a compaction or
a clustering; `ServiceSpec.steps` says what each point is for the others."""


@dataclass(frozen=True)
class ServiceSpec:
    """How a case submits its service, and on what table."""

    submit: str
    """The RFC-43 path word."""
    merge_on_read: bool = False
    extra_params: dict[str, Any] | None = None
    needs_metadata_table: bool = False
    metadata_partitions: tuple[str, ...] = ("files", "record_index")
    cleans_metadata_table: bool = False
    """The case is the metadata table's clean, which follows its compaction in one job: the
    table has slices of an older metadata compaction old enough to go."""
    deletes_city: str | None = None
    """The partition whose rows the service deletes (a partition TTL); the others read the
    same after it."""

    def steps(self, metadata_table: bool) -> dict[str, str]:
        """Kill point → step, for this service (the points it has)."""
        if self.cleans_metadata_table:  # the metadata table has no metadata table of its own
            points = {
                "plan written": f"{METADATA_STAGES}cleaning",
                "tasks writing": f"{METADATA_STAGES}{TASKS_WRITING}",
                "tasks done, before the commit": f"{METADATA_STAGES}committing",
                "data committed, before the result": "committed",
            }
        elif self.submit == "clean":  # its metadata commit comes before "committing"
            points = dict(STEPS)
            points["tasks done, before the metadata commit"] = (
                "syncing metadata" if metadata_table else "committing"
            )
        elif self.submit == "metadata-compaction":
            points = {
                "plan written": "starting Spark",
                "tasks writing": "tasks writing",
                "compaction committed, before the metadata clean": "cleaning",
                "data committed, before the result": "committed",
            }
        elif self.submit == "logcompact" and not metadata_table:
            points = dict(STEPS)  # tms's own code runs it, as it runs a compaction
        elif self.submit in ("partition_ttl", "logcompact"):
            # tms plans, Hudi's code runs it (tms's own log compaction declines the matrix's
            # metadata tables: their record index)
            points = {
                "plan written": "starting Spark",
                "Hudi's code about to run": HUDI_STAGE,
                "data committed, before the result": "committed",
            }
        elif self.submit == "index":
            points = {
                "plan written": "starting Spark",
                "tasks writing": "tasks writing",
                "data committed, before the result": "committed",
            }
        else:
            points = dict(STEPS)
        if not metadata_table:
            points.pop("metadata committed, before the data commit", None)
        return points


SERVICES: dict[str, ServiceSpec] = {
    "compaction": ServiceSpec("compact", merge_on_read=True),
    "log compaction": ServiceSpec(
        "logcompact", merge_on_read=True, extra_params={"log_blocks_threshold": 2}
    ),
    "partition ttl": ServiceSpec("partition_ttl", extra_params={"ttl_days": 1}, deletes_city="sf"),
    "clustering": ServiceSpec("cluster"),
    "clean": ServiceSpec("clean", extra_params={"retained": 1}),
    "metadata compaction": ServiceSpec(
        "metadata-compaction", merge_on_read=True, needs_metadata_table=True
    ),
    "metadata clean": ServiceSpec(
        "metadata-compaction",
        merge_on_read=True,
        needs_metadata_table=True,
        cleans_metadata_table=True,
    ),
    "index build": ServiceSpec(
        "index",
        extra_params={"partitions": "record_index"},
        needs_metadata_table=True,
        metadata_partitions=("files",),
    ),
}
NO_KILL = "none"
"""The kill point of a baseline case: the job runs through, as a measure of the others."""


ENGINES: dict[str, dict[str, Any]] = {
    "spark-submit": {},
    # one resident worker runs every attempt; the service launches nothing itself
    "spark-worker": {"workers": 1, "worker_slots": 1, "max_running_per_instance": 0},
}
"""How the service runs its jobs, as `tms serve` settings."""


@dataclass(frozen=True)
class Case:
    service: str
    table_version: int
    metadata_table: bool
    kill_point: str
    engine: str = "spark-submit"

    @property
    def name(self) -> str:
        mdt = "+mdt" if self.metadata_table else ""
        worker = "-worker" if self.engine == "spark-worker" else ""
        step = self.kill_point.split(",")[0]
        service = self.service.replace(" ", "_")
        return f"{service}-v{self.table_version}{mdt}{worker}-{step}"


@dataclass
class Outcome:
    """What one case saw, for the matrix: its attempts, and the seconds from the submit to
    the operation's end."""

    case: Case
    recovered: bool
    attempts: list[str]
    seconds: float

    def row(self) -> dict[str, Any]:
        return {**asdict(self.case), **{k: v for k, v in asdict(self).items() if k != "case"}}


def _city(i: int) -> str:
    return ("sf", "nyc")[i % 2]


def trips(ids: range | list[int], ts: int) -> pa.Table:
    ids_list = list(ids)
    return pa.table(
        {
            "id": pa.array([f"id{i:04d}" for i in ids_list]),
            "ts": pa.array([ts] * len(ids_list), pa.int64()),
            "city": pa.array([_city(i) for i in ids_list]),
            "fare": pa.array([float(i * 7 % 100) + ts for i in ids_list]),
        }
    )


def table_for(root: Path, case: Case) -> str:
    """A table with work for the case's service: log files to compact (its own, or its
    metadata table's), small files to cluster, older file versions to clean, a metadata
    partition to build."""
    spec = SERVICES[case.service]
    with pytest.MonkeyPatch.context() as patched:
        if spec.deletes_city:  # the table made and every city written in 2020
            frozen_clock(patched, Clock.at("2020-01-01"))
        table = create_table(
            str(root / case.name),
            "trips",
            table_type="MERGE_ON_READ" if spec.merge_on_read else "COPY_ON_WRITE",
            record_key_fields=["id"],
            ordering_field="ts",
            partition_fields=["city"],
            table_version=case.table_version,
            metadata_partitions=spec.metadata_partitions if case.metadata_table else (),
        )
        writer = HudiWriter(table, max_file_rows=10)
        if spec.deletes_city:
            writer.insert(trips(range(80), ts=1))
    if spec.deletes_city:  # the other cities written again now
        writer.upsert(trips([i for i in range(80) if _city(i) != spec.deletes_city], ts=2))
        return table.base_path
    writer.insert(trips(range(80), ts=1))
    writer.upsert(trips(range(0, 80, 3), ts=2))
    if spec.submit == "logcompact":  # a second log block in each slice the first upsert wrote
        writer.upsert(trips(range(0, 80, 3), ts=3))
    if spec.submit == "clean":
        writer.upsert(trips(range(80), ts=3))
        writer.upsert(trips(range(80), ts=4))
    if spec.cleans_metadata_table:
        age_metadata_slices(table.base_path)
    return table.base_path


def age_metadata_slices(base_path: str) -> None:
    """Compact the metadata table (in this process), then write more commits than its
    clean retains (Hudi's 20): the compaction the case submits is followed by a clean that
    deletes the slices this one left behind."""
    storage = Storage(base_path)
    instant = schedule_metadata_compaction(storage)
    assert instant is not None, "the metadata table has nothing to compact"
    execute_metadata_compaction(storage, instant)
    for n in range(METADATA_CLEANER_COMMITS_RETAINED + 1):
        writer = HudiWriter(HudiTable.open(base_path), max_file_rows=10)
        writer.upsert(trips(range(n % 7, 80, 7), ts=5 + n))


COLUMNS = ["id", "ts", "city", "fare"]
"""The columns of `trips`, as Hudi's reader is asked for them."""


def run_case(services: Services, root: Path, case: Case, hudi: HudiSpark) -> Outcome:
    """Run `case` on a service of its own; asserts what must hold after recovery, with
    `hudi` (Hudi's own Spark) as the second judge."""
    pause = root / f"pause-{case.name}"
    pause.mkdir(parents=True)
    base = table_for(root, case)
    before = oracle.snapshot(base)
    read_by_hudi = hudi.read(base, COLUMNS)
    by_hudi_rs = sorted(zip(*(before.column(c).to_pylist() for c in COLUMNS), strict=True))
    assert read_by_hudi == by_hudi_rs, "Hudi's reader and hudi-rs differ before the service"
    spec = SERVICES[case.service]
    if spec.deletes_city:  # what must read the same afterwards: the other partitions
        before = before.filter(pc.not_equal(before.column("city"), spec.deletes_city))
        read_by_hudi = [row for row in read_by_hudi if row[2] != spec.deletes_city]
        assert before.num_rows == len(read_by_hudi) > 0
    step = None if case.kill_point == NO_KILL else spec.steps(case.metadata_table)[case.kill_point]
    hold = {} if step is None else {"fault_pause_at": step}
    service = services.start(
        case.name, fault_pause_dir=pause, default_max_retries=5, **hold, **ENGINES[case.engine]
    )
    started = time.monotonic()
    service.post(
        "/v1/hoodie/service/register",
        {"db_name": "lake", "table_name": case.name, "base_path": base},
    )
    body: dict[str, Any] = {"db_name": "lake", "table_name": case.name}
    if spec.extra_params:
        body["extra_params"] = spec.extra_params
    submitted = service.post(f"/v1/hoodie/service/{spec.submit}/submit", body)
    killed = None
    if hold:
        held = f"{step}.*"
        service.wait_for(f"the job at {case.kill_point}", lambda: list(pause.glob(held)), 240)
        running = service.operation(submitted["id"])
        killed = running["current_attempt_id"]
        assert running["status"] == "RUNNING" and running["instant"], running
        assert kill_job(service, case.engine, killed), "no job process to kill"
        (pause / "go").touch()

    operation = service.wait_terminal(submitted["id"], timeout=300)
    attempts = service.attempts(submitted["id"])
    seconds = time.monotonic() - started
    outcome = Outcome(case, True, [describe(a) for a in attempts], seconds)
    assert operation["status"] == "COMPLETED", (operation["last_error"], outcome.attempts)
    if killed is not None:
        assert attempts[0]["id"] == killed and attempts[0]["outcome"] in ("FAILED", "LOST")
    assert attempts[-1]["outcome"] == "SUCCEEDED"
    instant = operation["instant"]
    # rows, not schemas: a log compacted block's schema may say a meta field is not null
    assert oracle.snapshot(base).to_pylist() == before.to_pylist(), "the rows read differently"
    assert hudi.read(base, COLUMNS) == read_by_hudi, "Hudi's reader reads differently"
    assert_nothing_left(Path(base), instant)
    if case.metadata_table:
        assert_metadata_agrees(Path(base), root / f"listed-{case.name}")
        report = hudi.run("tests.hudi_java.metadata_check:compare", base)
        assert report["problems"] == [], f"Hudi's metadata check: {report['problems']}"
        assert report["files"] > 0, report
    if spec.cleans_metadata_table:
        assert_metadata_cleaned(base)
    service.stop()
    return outcome


def assert_metadata_cleaned(base_path: str) -> None:
    """The metadata table's clean completed, deleting files, and none is left pending."""
    timeline = MetadataTableReader.open(Storage(base_path)).timeline
    assert timeline.pending([Action.CLEAN]) == [], "a metadata table clean left pending"
    cleans = timeline.completed([Action.CLEAN])
    assert cleans, "the metadata table was not cleaned"
    deleted = timeline.clean_metadata(cleans[-1])["totalFilesDeleted"]
    assert deleted > 0, "the metadata table's clean deleted nothing"


def kill_job(service: Service, engine: str, attempt_id: int) -> list[int]:
    """SIGKILL what runs the attempt: the spark-submit job's process groups, or the resident
    worker's (its JVM and Python workers with it); the groups killed."""
    if engine == "spark-submit":
        return kill_job_processes(service.url, attempt_id)
    groups = []
    for worker in service.get("/v1/workers"):
        with contextlib.suppress(ProcessLookupError):
            groups.append(os.getpgid(worker["pid"]))
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    return groups


def describe(attempt: dict[str, Any]) -> str:
    error = (attempt["error"] or "").partition("\n")[0]
    return f"{attempt['outcome']}{f' ({error})' if error else ''}"


def assert_nothing_left(root: Path, instant: str) -> None:
    """No marker of the instant, and no base file of an instant that did not complete, in
    the table or in its metadata table."""
    assert not (root / ".hoodie" / ".temp" / instant).exists(), "markers left behind"
    metadata = root / ".hoodie" / "metadata"
    assert not (metadata / ".hoodie" / ".temp" / instant).exists(), "metadata markers left"
    completed = {i.requested_time for i in HudiTable.open(str(root)).timeline().completed()}
    stray = [
        str(path.relative_to(root))
        for path in root.rglob("*.parquet")
        if ".hoodie" not in path.relative_to(root).parts and _instant_of(path) not in completed
    ]
    assert stray == [], "data files of instants that never completed"
    if (metadata / ".hoodie" / "hoodie.properties").exists():
        reader = MetadataTableReader.open(Storage(str(root)))
        done = {i.requested_time for i in reader.timeline.completed()}
        stray = [
            str(path.relative_to(root))
            for path in metadata.rglob("*.hfile")
            if ".hoodie" not in path.relative_to(metadata).parts and _instant_of(path) not in done
        ]
        assert stray == [], "metadata table base files of instants that never completed"


def _instant_of(base_file: Path) -> str:
    """The instant a base file (`<file id>_<write token>_<instant>.<ext>`) was written by."""
    return base_file.stem.rsplit("_", 1)[-1]


def assert_metadata_agrees(root: Path, listed: Path) -> None:
    """The metadata table lists what storage holds, and hudi-rs reads the same through it as
    by listing."""
    shutil.copytree(root, listed)
    without_metadata_table(listed)
    assert oracle.rows_by_key(str(root)) == oracle.rows_by_key(str(listed))
    assert oracle.file_slices(str(root)) == oracle.file_slices(str(listed))
    reader = MetadataTableReader.open(Storage(str(root)))
    assert reader.all_files() == committed_files_on_storage(root)
    assert rows_of(metadata_file_system_view(reader).latest_file_slices()) == rows_of(
        HudiTable.open(str(root)).file_system_view().latest_file_slices()
    )


__all__ = ["ENGINES", "NO_KILL", "SERVICES", "STEPS", "Case", "Outcome", "run_case"]
