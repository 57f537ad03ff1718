"""The service end to end, as users meet it: `tms serve` subprocesses on a real PostgreSQL,
writers that notify it through Hudi's commit callback, operators that submit through the
RFC-43 API, real `spark-submit` jobs and resident Spark workers, real merge-on-read tables
read back by the oracle (hudi-rs), and crashes by SIGKILL."""

from __future__ import annotations

import itertools
import shutil
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from sqlalchemy import Engine, func, select

from tests import oracle
from tests.crash import has_markers
from tests.e2e.conftest import Service, Services, kill_job_processes
from tests.e2e.writer_callbacks import (
    CALLBACK_HEADERS,
    CALLBACK_PATH,
    CallbackWriter,
    commit_metadata,
    synthetic_callback,
)
from tests.services.test_clustering import small_files_table
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.table import HudiTable
from tms.store import Commit, Instance
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

pytestmark = pytest.mark.spark

CITIES = ("sf", "nyc", "la")


def trips(ids: Iterable[int], ts: int) -> pa.Table:
    keys = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in keys]),
            "ts": pa.array([ts] * len(keys), pa.int64()),
            "city": pa.array([CITIES[i % len(CITIES)] for i in keys]),
            "fare": pa.array([i + ts / 100 for i in keys], pa.float64()),
        }
    )


def new_table(root: Path, name: str, *, max_file_rows: int = 100) -> HudiWriter:
    """An empty merge-on-read table partitioned by city (table version 6)."""
    table = create_table(
        str(root / name),
        name,
        table_type="MERGE_ON_READ",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
    )
    return HudiWriter(table, max_file_rows=max_file_rows)


def rows(base_path: str) -> list[dict[str, Any]]:
    snapshot: list[dict[str, Any]] = oracle.snapshot(base_path).to_pylist()
    return snapshot


def slices_with_logs(base_path: str) -> list[dict[str, Any]]:
    return [s for s in oracle.file_slices(base_path) if s["log_files"]]


def files_of_instant(base_path: str, instant: str) -> set[str]:
    """Data files (relative paths) whose name carries `instant` as their base instant."""
    root = Path(base_path)
    return {
        str(path.relative_to(root))
        for path in root.rglob(f"*_{instant}.parquet")
        if ".hoodie" not in path.relative_to(root).parts
    }


def pending_clusterings(base_path: str) -> list[str]:
    """Requested times of the clustering plans pending on the table."""
    return [i.requested_time for i in HudiTable.open(base_path).timeline().pending_clusterings()]


def when(value: str) -> datetime:
    return datetime.fromisoformat(value)


def statuses(operation: dict[str, Any]) -> list[str]:
    return [event["to_status"] for event in operation["events"]]


def describe(attempts: list[dict[str, Any]]) -> str:
    """One line per attempt, printed for the record (`pytest -s` shows it)."""
    lines = []
    for a in attempts:
        error = (a["error"] or "").partition("\n")[0]
        lines.append(
            f"  attempt {a['number']} on {a['instance_id']}: {a['outcome']} "
            f"exit={a['exit_code']} {error}"
        )
    return "\n".join(lines)


ENGINES = {
    "spark-submit": {},
    # the service starts a resident worker and launches nothing itself; the worker restarts
    # its SparkSession after each attempt
    "spark-worker": {
        "workers": 1,
        "worker_slots": 1,
        "max_running_per_instance": 0,
        "worker_restart_after_attempts": 1,
    },
}


@pytest.mark.parametrize("engine", list(ENGINES))
def test_callbacks_trigger_a_compaction_that_a_spark_job_runs(
    services: Services, tmp_path: Path, engine: str
) -> None:
    service = services.start("a", compaction_delta_commits=3, **ENGINES[engine])
    writer = CallbackWriter(new_table(tmp_path, "trips", max_file_rows=10), service.http)
    base = writer.base_path

    _, first = writer.write("insert", trips(range(60), ts=1))
    assert first["table_registered"] and first["action"] == "deltacommit"
    _, second = writer.write("upsert", trips(range(0, 60, 3), ts=2))
    assert first["operations_created"] == second["operations_created"] == []
    third_instant = writer.commit("upsert", trips(range(1, 60, 4), ts=3))
    before = rows(base)
    to_compact = slices_with_logs(base)
    assert before and to_compact
    third = writer.notify(third_instant)  # the third delta commit crosses the threshold
    [operation_id] = third["operations_created"]

    operation = service.wait_terminal(operation_id, timeout=180)
    assert operation["status"] == "COMPLETED", operation["last_error"]
    assert operation["action"] == "compaction" and operation["instant"]
    [attempt] = service.attempts(operation_id)
    assert attempt["outcome"] == "SUCCEEDED" and attempt["error"] is None
    assert attempt["engine"] == engine and attempt["launch_seconds"] is not None
    figures = attempt["figures"]
    assert figures["instant"] == operation["instant"]
    assert figures["file_groups"] == figures["files_written"] == len(to_compact)
    assert figures["log_files_compacted"] == sum(len(s["log_files"]) for s in to_compact)
    assert figures["records_written"] > 0 and figures["bytes_written"] > 0

    assert (operation["instant"], "commit") in oracle.completed_instants(base)
    assert rows(base) == before
    assert slices_with_logs(base) == []
    table = service.get(f"/v1/tables/{third['table_id']}")
    assert table["delta_commits_since_compaction"] == 0
    if engine == "spark-worker":
        worker_log = service.log_dir / "worker" / "worker-0.log"
        service.wait_for(
            "the worker to restart its SparkSession",
            lambda: "restarting the SparkSession: 1 attempts ran on it" in worker_log.read_text(),
            timeout=120,
        )
        (worker,) = service.get("/v1/workers")
        assert worker["alive"] and worker["attempts_run"] == 1


def test_a_submit_for_hudis_executor_is_run_by_hudis_code(
    services: Services, tmp_path: Path
) -> None:
    """`executor: hudi`: Apache Hudi's own compaction runs in the service's resident worker,
    whose session carries Hudi's bundle (a spark-submit job with it is
    `tests/hudi_java/test_hudi_executor.py`'s), and the operation says so; the table reads
    the same, its log files compacted."""
    service = services.start("a", **ENGINES["spark-worker"])
    writer = new_table(tmp_path, "trips", max_file_rows=10)
    writer.insert(trips(range(40), ts=1))
    writer.upsert(trips(range(0, 40, 3), ts=2))
    base = writer.table.base_path
    before, to_compact = rows(base), slices_with_logs(base)
    assert before and to_compact
    service.post(
        "/v1/hoodie/service/register",
        {"db_name": "lake", "table_name": "trips", "base_path": base},
    )
    submitted = service.post(
        "/v1/hoodie/service/compact/submit",
        {"db_name": "lake", "table_name": "trips", "executor": "hudi"},
    )
    operation = service.wait_terminal(submitted["id"], timeout=240)
    assert operation["status"] == "COMPLETED", operation["last_error"]
    assert (operation["executor"], operation["executed_by"]) == ("hudi", "hudi")
    assert operation["native_declined"] is None
    [attempt] = service.attempts(submitted["id"])
    assert attempt["figures"]["executor"] == "hudi"
    assert attempt["figures"]["file_groups"] == len(to_compact)
    assert (operation["instant"], "commit") in oracle.completed_instants(base)
    assert rows(base) == before
    assert slices_with_logs(base) == []


def test_a_table_whose_writer_never_notifies_is_compacted_through_the_pull(
    services: Services, tmp_path: Path
) -> None:
    """A writer without the callback (a Flink job, a misconfigured writer): the service
    reads the table's timeline itself, records the delta commits as pulled, and the
    trigger's compaction runs as a real Spark job."""
    service = services.start(
        "a",
        compaction_delta_commits=3,
        pull_listings_per_minute=600,
        notification_timeout_seconds=2,
    )
    writer = new_table(tmp_path, "quiet", max_file_rows=10)
    base = writer.table.base_path
    writer.insert(trips(range(60), ts=1))
    writer.upsert(trips(range(0, 60, 3), ts=2))
    writer.upsert(trips(range(1, 60, 4), ts=3))
    before, to_compact = rows(base), slices_with_logs(base)
    assert before and to_compact
    table = service.post(
        "/v1/tables", {"db_name": "default", "table_name": "quiet", "base_path": base}
    )

    def compaction() -> dict[str, Any] | None:
        page = service.get("/v1/operations", table_id=table["id"], action="compaction")
        return page["items"][0] if page["items"] else None

    service.wait_for("the pull to create a compaction", lambda: compaction() is not None, 60)
    created = compaction()
    assert created is not None
    operation = service.wait_terminal(created["id"], timeout=180)
    assert operation["status"] == "COMPLETED", operation["last_error"]
    assert operation["events"][0]["reason"].startswith("policy: 3 delta commits")
    assert rows(base) == before
    assert slices_with_logs(base) == []
    pulled = service.get(f"/v1/tables/{table['id']}")
    assert pulled["last_notification_at"] is None
    assert pulled["last_pulled_at"] is not None and pulled["last_commit_seen_at"] is not None
    # The compaction's own commit is read back by a later pull: the counter stays at zero.
    service.wait_for(
        "the compaction's commit to be pulled",
        lambda: (
            service.get(f"/v1/tables/{table['id']}")["last_compaction_at"] is not None
            and service.get(f"/v1/tables/{table['id']}")["last_commit_instant"]
            == operation["instant"]
        ),
        60,
    )
    assert service.get(f"/v1/tables/{table['id']}")["delta_commits_since_compaction"] == 0


def test_a_failing_job_is_retried_with_backoff_then_fails_with_its_reason(
    services: Services, tmp_path: Path
) -> None:
    service = services.start("a")
    base = new_table(tmp_path, "gone").table.base_path
    service.post(
        "/v1/hoodie/service/register",
        {"db_name": "lake", "table_name": "gone", "base_path": base},
    )
    shutil.rmtree(base)  # the table disappears after it was registered
    submitted = service.post(
        "/v1/hoodie/service/compact/submit",
        {"db_name": "lake", "table_name": "gone", "max_retries": 1},
    )

    operation = service.wait_terminal(submitted["id"], timeout=120)
    assert operation["status"] == "FAILED"
    assert statuses(operation) == ["SCHEDULED", "RUNNING", "SCHEDULED", "RUNNING", "FAILED"]

    def with_exit_codes() -> list[dict[str, Any]] | None:
        # The scheduler records a job's exit code when it sees the process end.
        found = service.attempts(submitted["id"])
        return found if all(a["exit_code"] is not None for a in found) else None

    attempts: list[dict[str, Any]] = service.wait_for("exit codes", with_exit_codes, 30)
    print(f"operation {submitted['id']}:\n{describe(attempts)}")
    assert [a["outcome"] for a in attempts] == ["FAILED", "FAILED"]
    for attempt in attempts:
        assert attempt["error"] and base in attempt["error"], attempt["error"]
        assert attempt["exit_code"] != 0
        assert attempt["log_path"] and Path(attempt["log_path"]).is_file()
    assert operation["last_error"] == attempts[-1]["error"]
    # The second launch waited out the backoff (retry_base_seconds=1, no jitter) after the
    # first one had failed.
    waited = when(attempts[1]["started_at"]) - when(attempts[0]["finished_at"])
    assert waited >= timedelta(seconds=1), waited


@pytest.mark.parametrize(
    "server_too",
    [
        # the job alone killed: the kill matrix's cases kill jobs too (extended run)
        pytest.param(False, id="job-killed", marks=pytest.mark.extended),
        # The launching instance dies with its job: only the lease can tell the job is gone.
        pytest.param(True, id="job-and-server-killed"),
    ],
)
def test_a_job_killed_mid_compaction_is_retried_and_the_table_reads_the_same(
    services: Services, tmp_path: Path, server_too: bool
) -> None:
    service = services.start(
        "a", compaction_delta_commits=3, lease_seconds=10, default_max_retries=5
    )
    # Many small file groups: the compaction writes one after the other, for long enough to
    # be caught with its markers on storage.
    writer = CallbackWriter(new_table(tmp_path, "trips", max_file_rows=5), service.http)
    base = writer.base_path
    writer.write("insert", trips(range(90), ts=1))
    writer.write("upsert", trips(range(0, 90, 2), ts=2))
    third_instant = writer.commit("upsert", trips(range(1, 90, 2), ts=3))
    before = rows(base)
    to_compact = slices_with_logs(base)
    assert len(to_compact) >= 12
    [operation_id] = writer.notify(third_instant)["operations_created"]

    service.wait_for("compaction markers", has_markers(base), timeout=180, interval=0.01)
    running = service.operation(operation_id)
    assert running["status"] == "RUNNING" and running["instant"], running
    instant, killed_attempt = running["instant"], running["current_attempt_id"]
    if server_too:
        service.kill()
    assert kill_job_processes(service.url, killed_attempt), "no job process to kill"
    temp = Path(base) / ".hoodie" / ".temp" / instant
    assert temp.is_dir()  # the killed attempt left its markers (and maybe files) behind
    if server_too:
        service.start()  # a new instance on the same database

    operation = service.wait_terminal(operation_id, timeout=240)
    assert operation["status"] == "COMPLETED", operation["last_error"]
    attempts = service.attempts(operation_id)
    print(f"compaction {instant}, attempt {killed_attempt} killed:\n{describe(attempts)}")
    assert len(attempts) >= 2 and attempts[0]["id"] == killed_attempt
    if server_too:
        assert attempts[0]["outcome"] == "LOST"
        assert "lease expired" in attempts[0]["error"], attempts[0]
        assert attempts[-1]["instance_id"] != attempts[0]["instance_id"]
    else:
        # The launching instance sees the process die (FAILED, killed by signal 9) unless
        # the lease expires first (LOST); either way the reason is kept.
        assert attempts[0]["outcome"] in ("FAILED", "LOST")
        assert attempts[0]["error"], attempts[0]
    assert attempts[-1]["outcome"] == "SUCCEEDED"
    assert all(a["outcome"] != "SUCCEEDED" for a in attempts[:-1])
    assert attempts[-1]["figures"]["rolled_back"], "the killed attempt was not rolled back"

    assert rows(base) == before
    assert slices_with_logs(base) == []
    assert not temp.exists()
    written = {stat.path for stat in commit_metadata(base, instant).write_stats()}
    assert files_of_instant(base, instant) == written  # nothing of the killed attempt is left
    assert len(written) == len(to_compact)


def _wait_all_terminal(service: Service, ids: list[int], timeout: float) -> list[dict[str, Any]]:
    def finished() -> list[dict[str, Any]] | None:
        found = {op["id"]: op for op in service.operations()}
        ops = [found[i] for i in ids]
        return ops if all(op["status"] not in ("SCHEDULED", "RUNNING") for op in ops) else None

    result: list[dict[str, Any]] = service.wait_for(
        f"{len(ids)} operations to finish", finished, timeout, interval=1.0
    )
    return result


def test_two_instances_run_each_operation_exactly_once(
    services: Services, tmp_path: Path, engine: Engine
) -> None:
    a = services.start("a")
    b = services.start("b")
    # Four tiny tables, a compaction and a clean submitted for each (half through each
    # instance; each instance runs one job at a time, so both run some). Odd tables have a
    # log file, so their compaction is real Spark work; the other jobs start, plan, and find
    # nothing to do.
    submitted: dict[int, tuple[str, str]] = {}  # operation id → (table, action)
    snapshots: dict[str, list[dict[str, Any]]] = {}
    logs: dict[str, int] = {}  # log files per table
    for n in range(4):
        name = f"t{n}"
        writer = new_table(tmp_path, name)
        writer.insert(trips(range(n, n + 6), ts=1))
        if n % 2:
            writer.upsert(trips(range(n, n + 6, 2), ts=2))
        base = writer.table.base_path
        snapshots[base] = rows(base)
        logs[base] = sum(len(s["log_files"]) for s in slices_with_logs(base))
        (a, b)[n % 2].post(
            "/v1/hoodie/service/register",
            {"db_name": "lake", "table_name": name, "base_path": base},
        )
        for service, word in ((a, "compact"), (b, "clean")):
            body = {"db_name": "lake", "table_name": name}
            answer = service.post(f"/v1/hoodie/service/{word}/submit", body)
            assert answer["created"]
            submitted[answer["id"]] = (base, answer["action"])
    assert len(submitted) == 8

    started = time.monotonic()
    operations = _wait_all_terminal(a, sorted(submitted), timeout=420)
    print(f"8 operations on 2 instances took {time.monotonic() - started:.0f}s")
    assert [op["status"] for op in operations] == ["COMPLETED"] * 8, [
        (op["id"], op["status"], op["last_error"]) for op in operations
    ]
    ran_on: dict[str, int] = {}
    for operation in operations:
        attempts = a.attempts(operation["id"])
        assert [x["outcome"] for x in attempts] == ["SUCCEEDED"], describe(attempts)
        assert statuses(a.operation(operation["id"])).count("RUNNING") == 1
        instance = attempts[0]["instance_id"]
        ran_on[instance] = ran_on.get(instance, 0) + 1
        base, action = submitted[operation["id"]]
        if action == "compaction" and logs[base]:
            assert attempts[0]["figures"]["log_files_compacted"] == logs[base]
        else:
            figures = attempts[0]["figures"]
            # nothing was written but the table lock the planning took (a PUT to create the
            # lock file, a DELETE to release it): the other requests are the reads
            requests = figures["storage_requests"]
            assert (requests["PUT"], requests["DELETE"]) == (1, 1), figures
            del figures["storage_requests"]
            assert figures == {"nothing_to_do": True, "executor": "native"}, figures
    print(f"attempts per instance: {ran_on}")
    with engine.connect() as connection:
        instances = set(connection.execute(select(Instance.id)).scalars())
    assert set(ran_on) == instances and len(instances) == 2  # both instances ran some
    for base, before in snapshots.items():
        assert rows(base) == before
        assert slices_with_logs(base) == []


def test_every_acknowledged_notification_survives_a_server_crash(
    services: Services, tmp_path: Path, engine: Engine
) -> None:
    service = services.start("a", max_running_per_instance=0)
    writer = new_table(tmp_path, "stream")
    base = writer.table.base_path
    acked: list[str] = []
    refused: list[tuple[str, int, str]] = []
    failed: list[str] = []  # requests that got no answer (the server was gone)
    stop = threading.Event()

    def payload(instant: str) -> dict[str, Any]:
        return synthetic_callback(base, "stream", instant)

    def stream(worker: int) -> None:
        with httpx.Client(base_url=service.url, timeout=10.0) as client:
            for n in itertools.count():
                if stop.is_set():
                    return
                instant = f"20260101{worker}{n:08d}"
                try:
                    response = client.post(
                        CALLBACK_PATH, json=payload(instant), headers=CALLBACK_HEADERS
                    )
                except httpx.HTTPError as exc:
                    failed.append(f"{instant}: {exc!r}")
                    time.sleep(0.01)
                    continue
                if response.is_success:
                    acked.append(instant)
                else:
                    refused.append((instant, response.status_code, response.text))

    threads = [threading.Thread(target=stream, args=(w,), daemon=True) for w in range(1, 5)]
    for thread in threads:
        thread.start()
    try:
        service.wait_for("300 acknowledged notifications", lambda: len(acked) >= 300, 120, 0.01)
        service.kill()  # SIGKILL while requests are in flight
        time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    print(f"{len(acked)} notifications acknowledged, {len(failed)} unanswered after the kill")
    assert refused == []
    assert failed, "no request failed: the server was not killed mid-stream"

    service.start()  # the same database, the same port
    with engine.connect() as connection:
        stored = dict(
            connection.execute(select(Commit.instant, func.count()).group_by(Commit.instant)).all()
        )
    missing = sorted(set(acked) - stored.keys())
    assert missing == [], f"{len(missing)} acknowledged notifications were lost: {missing[:5]}"
    assert {instant: n for instant, n in stored.items() if n != 1} == {}
    # The API agrees: the table counted each stored commit once, and a writer repeating an
    # acknowledged notification is told it is known, not stored again.
    [table] = service.get("/v1/tables")["items"]
    assert table["delta_commits_since_compaction"] == len(stored)
    for instant in acked[:20]:
        again = service.http.post(CALLBACK_PATH, json=payload(instant), headers=CALLBACK_HEADERS)
        assert again.status_code == 200 and again.json()["new"] is False, again.text
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(Commit)).scalar_one() == len(
            stored
        )


def test_a_worker_the_service_started_ends_when_the_service_is_killed(
    services: Services,
) -> None:
    """A crash of `tms serve` does not leave its resident worker behind, claiming for a
    service that is gone: the worker sees its parent go and stops."""
    service = services.start("a", **ENGINES["spark-worker"])
    (worker,) = service.wait_for("the worker to register", lambda: service.get("/v1/workers"), 120)
    service.kill()
    deadline = time.monotonic() + 90
    while True:
        try:
            status = Path(f"/proc/{worker['pid']}/status").read_text(errors="replace")
        except FileNotFoundError:
            break
        if "State:\tZ" in status:
            break  # exited; its parent (init) has not reaped it yet
        assert time.monotonic() < deadline, "the worker outlived its service"
        time.sleep(0.5)


def test_a_cancel_while_the_job_starts_spark_leaves_no_plan_pending(
    services: Services, tmp_path: Path
) -> None:
    """An operator cancels a clustering whose job has written its plan and is still starting
    Spark (held there by the fault hook); the job cannot stop in time and the scheduler
    kills it. The service aborts the plan itself, and the retry clusters the same file
    groups."""
    pause = tmp_path / "pause"
    pause.mkdir()
    base = small_files_table(tmp_path / "small", COPY_ON_WRITE, rows=240, table_version=9)
    before = rows(base)
    service = services.start(
        "a", heartbeat_interval_seconds=2, fault_pause_at="starting Spark", fault_pause_dir=pause
    )
    service.post(
        "/v1/hoodie/service/register",
        {"db_name": "lake", "table_name": "small", "base_path": base},
    )
    submitted = service.post(
        "/v1/hoodie/service/cluster/submit", {"db_name": "lake", "table_name": "small"}
    )
    service.wait_for("the job to start Spark", lambda: list(pause.glob("starting Spark.*")), 180)
    running = service.operation(submitted["id"])
    planned = running["instant"]
    assert running["status"] == "RUNNING" and planned, running
    assert pending_clusterings(base) == [planned]

    service.post(f"/v1/operations/{submitted['id']}/cancel")
    cancelled = service.wait_terminal(submitted["id"], timeout=120)
    (killed,) = service.attempts(submitted["id"])
    print(describe([killed]))
    assert cancelled["status"] == "CANCELLED"
    assert "killed by the scheduler: cancel requested" in killed["error"], killed
    service.wait_for("the plan to be aborted", lambda: pending_clusterings(base) == [], timeout=120)
    assert rows(base) == before

    (pause / "go").touch()
    again = service.post(f"/v1/operations/{submitted['id']}/retry")
    assert again["id"] != submitted["id"]
    done = service.wait_terminal(again["id"], timeout=300)
    assert done["status"] == "COMPLETED", done["last_error"]
    (attempt,) = service.attempts(again["id"])
    assert attempt["figures"]["file_groups"] > 0, "the retry clustered the freed file groups"
    assert (done["instant"], "replacecommit") in oracle.completed_instants(base)
    assert rows(base) == before
