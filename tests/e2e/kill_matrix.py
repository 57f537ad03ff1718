"""A job SIGKILLed at each step of a table service, as the OOM killer or a lost node would,
and what the next attempt makes of it.

Each case: a fresh table (merge-on-read for a compaction, many small copy-on-write files for
a clustering; versions 6 and 9, with or without a metadata table) registered with a `tms
serve` that holds its jobs at one step (`tms.hudi.fault_pause`); once the job is held
there, its whole process group is killed, the hold is released, and the operation must
complete on a later attempt. Then: the rows hudi-rs reads are those before; the metadata
table (where there is one) agrees with the listing; no data file of an instant that did not
complete and no marker is left; the operation's attempts show the one that was lost.
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

from tests import oracle
from tests.e2e.conftest import Service, Services, kill_job_processes
from tests.hudi.test_fixture_views import rows_of, without_metadata_table
from tests.hudi.test_metadata_reader import committed_files_on_storage
from tms.hudi.metadata.listing import metadata_file_system_view
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.sample_writer.new_table import create_table
from tms.hudi.sample_writer.writer import HudiWriter
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable

STEPS: dict[str, str] = {
    "plan written": "starting Spark",
    "tasks writing": "tasks writing",
    "tasks done, before the metadata commit": "committing",
    "metadata committed, before the data commit": "metadata committed",
    "data committed, before the result": "committed",
}
"""Kill point → the job's step (`tms.hudi.fault_pause`) held there."""
NO_KILL = "none"
"""The kill point of a baseline case: the job runs through, as a measure of the others."""
SUBMIT = {"compaction": "compact", "clustering": "cluster"}
METADATA = ("files", "record_index")


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
        return f"{self.service}-v{self.table_version}{mdt}{worker}-{step}"


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


def trips(ids: range, ts: int) -> pa.Table:
    ids_list = list(ids)
    return pa.table(
        {
            "id": pa.array([f"id{i:04d}" for i in ids_list]),
            "ts": pa.array([ts] * len(ids_list), pa.int64()),
            "city": pa.array([("sf", "nyc")[i % 2] for i in ids_list]),
            "fare": pa.array([float(i * 7 % 100) + ts for i in ids_list]),
        }
    )


def table_for(root: Path, case: Case) -> str:
    """A table with work for the case's service: log files to compact, or small files to
    cluster."""
    merge_on_read = case.service == "compaction"
    table = create_table(
        str(root / case.name),
        "trips",
        table_type="MERGE_ON_READ" if merge_on_read else "COPY_ON_WRITE",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=case.table_version,
        metadata_partitions=METADATA if case.metadata_table else (),
    )
    writer = HudiWriter(table, max_file_rows=10)
    writer.insert(trips(range(80), ts=1))
    writer.upsert(trips(range(0, 80, 3), ts=2))
    return table.base_path


def run_case(services: Services, root: Path, case: Case) -> Outcome:
    """Run `case` on a service of its own; asserts what must hold after recovery."""
    pause = root / f"pause-{case.name}"
    pause.mkdir(parents=True)
    base = table_for(root, case)
    before = oracle.snapshot(base)
    hold = {} if case.kill_point == NO_KILL else {"fault_pause_at": STEPS[case.kill_point]}
    service = services.start(
        case.name, fault_pause_dir=pause, default_max_retries=5, **hold, **ENGINES[case.engine]
    )
    started = time.monotonic()
    service.post(
        "/v1/hoodie/service/register",
        {"db_name": "lake", "table_name": case.name, "base_path": base},
    )
    submitted = service.post(
        f"/v1/hoodie/service/{SUBMIT[case.service]}/submit",
        {"db_name": "lake", "table_name": case.name},
    )
    killed = None
    if hold:
        held = f"{STEPS[case.kill_point]}.*"
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
    assert oracle.snapshot(base).equals(before), "the rows read differently"
    assert_nothing_left(base, instant)
    if case.metadata_table:
        assert_metadata_agrees(Path(base), root / f"listed-{case.name}")
    service.stop()
    return outcome


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


def assert_nothing_left(base: str, instant: str) -> None:
    """No marker of the instant, and no data file of an instant that did not complete."""
    root = Path(base)
    assert not (root / ".hoodie" / ".temp" / instant).exists(), "markers left behind"
    completed = {i.requested_time for i in HudiTable.open(base).timeline().completed()}
    stray = [
        str(path.relative_to(root))
        for path in root.rglob("*.parquet")
        if ".hoodie" not in path.relative_to(root).parts
        and path.stem.rsplit("_", 1)[-1] not in completed
    ]
    assert stray == [], "data files of instants that never completed"


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


__all__ = ["ENGINES", "NO_KILL", "STEPS", "Case", "Outcome", "run_case"]
