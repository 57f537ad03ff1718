"""A resident Spark worker runs attempts it claims from the service on its one SparkSession:
two compactions at once in its two slots, each reported as a spark-submit job reports, each
attempt's log holding that attempt's lines only, the tables read the same through hudi-rs;
the service lists the worker while it runs and forgets it when it leaves."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.api.conftest import batch, mor_writer
from tests.jobs.test_runner_cancel import make_clustering_stuck
from tests.services.test_clean_rollbacks import clustering_plan, state_of
from tests.worker import http
from tms.config import Settings, load_settings
from tms.hudi.timeline.instant import State
from tms.serve import free_port, serve_in_thread
from tms.worker import ResidentWorker, WorkerOptions

pytestmark = pytest.mark.spark


def _table(root: Path, name: str) -> str:
    """A merge-on-read table with a log file to compact."""
    writer = mor_writer(root, name, rows=40)
    writer.upsert(batch(range(0, 40, 3), ts=2))
    return writer.table.base_path


def _wait_done(url: str, operation_id: int, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        operation: dict[str, Any] = http.get(f"{url}/v1/operations/{operation_id}").json()
        if operation["status"] not in ("SCHEDULED", "RUNNING"):
            return operation
        time.sleep(0.5)
    raise AssertionError(f"operation {operation_id} did not finish: {operation}")


def _api_only(db_url: str, tmp_path: Path) -> Settings:
    return load_settings(
        config_file=False,
        environ={},
        database_url=db_url,
        data_dir=tmp_path / "data",
        port=free_port(),
        max_running_per_instance=0,  # API only: nothing here launches spark-submit
        pull_listings_per_minute=0,
        heartbeat_interval_seconds=1,
        lease_seconds=60,
    )


def _register(url: str, name: str, base: str) -> None:
    registered = http.post(
        f"{url}/v1/tables", json={"db_name": "lake", "table_name": name, "base_path": base}
    )
    assert registered.status_code == 201, registered.text


@contextmanager
def _worker(url: str, spark: Any, tmp_path: Path) -> Iterator[ResidentWorker]:
    """A two-slot worker on the test session, registered; stopped (and gone) afterwards."""
    options = WorkerOptions(api_url=url, slots=2, log_dir=tmp_path / "worker-logs", poll_seconds=1)
    worker = ResidentWorker(options, session_factory=lambda master, slots: spark)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not http.get(f"{url}/v1/workers").json():
            assert time.monotonic() < deadline, "the worker never registered"
            time.sleep(0.2)
        yield worker
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not thread.is_alive()
    assert http.get(f"{url}/v1/workers").json() == [], "a worker that stops leaves"


def test_a_worker_runs_two_compactions_at_once_and_reports_them(
    spark: Any, db_url: str, tmp_path: Path
) -> None:
    bases = {name: _table(tmp_path, name) for name in ("trips", "fares")}
    before = {name: oracle.snapshot(base) for name, base in bases.items()}
    with serve_in_thread(_api_only(db_url, tmp_path)) as service:
        url = service.url
        for name, base in bases.items():
            _register(url, name, base)
        with _worker(url, spark, tmp_path) as worker:
            submitted = {
                name: http.post(
                    f"{url}/v1/hoodie/service/compact/submit",
                    json={"db_name": "lake", "table_name": name},
                ).json()
                for name in bases
            }
            done = {name: _wait_done(url, op["id"]) for name, op in submitted.items()}
            listed = http.get(f"{url}/v1/workers").json()

        logs = {}
        for name, operation in done.items():
            assert operation["status"] == "COMPLETED", operation
            (attempt,) = http.get(f"{url}/v1/operations/{operation['id']}/attempts").json()
            assert (attempt["engine"], attempt["worker_id"]) == ("spark-worker", worker.worker_id)
            assert attempt["engine_note"] is None
            assert attempt["launch_seconds"] is not None and attempt["launch_seconds"] >= 0
            logs[name] = (attempt["id"], Path(attempt["log_path"]).read_text())
    (only,) = listed
    assert (only["id"], only["slots"], only["alive"]) == (worker.worker_id, 2, True)
    assert only["attempts_run"] == 2
    for name, (attempt_id, text) in logs.items():
        assert f"attempt {attempt_id} of operation" in text
        other = next(a for n, (a, _) in logs.items() if n != name)
        assert f"attempt {other} " not in text, "a log holds its own attempt's lines only"
    for name, base in bases.items():
        assert oracle.snapshot(base).equals(before[name]), name
        assert "commit" in {action for _, action in oracle.completed_instants(base)}, name


def test_a_cancel_stops_its_attempts_spark_jobs_only_and_a_failure_spares_the_worker(
    spark: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clustering stuck in a Spark task is cancelled by the operator: its job group is
    cancelled (the task never finishes) and the plan is aborted, while a compaction in the
    other slot completes; then an attempt that fails (its table is gone) leaves the worker
    running the next one."""
    stuck_base, instant = clustering_plan(tmp_path / "stuck")
    other = _table(tmp_path, "fares")
    doomed = _table(tmp_path, "doomed")
    finished = tmp_path / "stuck-task-finished"
    make_clustering_stuck(monkeypatch, finished)
    with serve_in_thread(_api_only(db_url, tmp_path)) as service:
        url = service.url
        _register(url, "stuck", stuck_base)
        _register(url, "fares", other)
        _register(url, "doomed", doomed)
        with _worker(url, spark, tmp_path) as worker:
            clustering = http.post(
                f"{url}/v1/hoodie/service/cluster/submit",
                json={"db_name": "lake", "table_name": "stuck", "instant": instant},
            ).json()
            tracker = spark.sparkContext.statusTracker()
            deadline = time.monotonic() + 120
            while not tracker.getActiveJobsIds():
                assert time.monotonic() < deadline, "the clustering never started its task"
                time.sleep(0.05)
            compaction = http.post(
                f"{url}/v1/hoodie/service/compact/submit",
                json={"db_name": "lake", "table_name": "fares"},
            ).json()
            cancelled = http.post(f"{url}/v1/operations/{clustering['id']}/cancel")
            assert cancelled.status_code == 200, cancelled.text
            assert _wait_done(url, clustering["id"])["status"] == "CANCELLED"
            assert _wait_done(url, compaction["id"])["status"] == "COMPLETED"

            shutil.rmtree(doomed)  # its job fails: the table is gone
            failed = http.post(
                f"{url}/v1/hoodie/service/compact/submit",
                json={"db_name": "lake", "table_name": "doomed", "max_retries": 0},
            ).json()
            assert _wait_done(url, failed["id"])["status"] == "FAILED"
            after = _table(tmp_path, "after")
            _register(url, "after", after)
            later = http.post(
                f"{url}/v1/hoodie/service/compact/submit",
                json={"db_name": "lake", "table_name": "after"},
            ).json()
            assert _wait_done(url, later["id"])["status"] == "COMPLETED"
            assert worker.attempts_finished == 4
    assert not finished.exists(), "the stuck task was cancelled, not waited for"
    assert state_of(stuck_base, instant) is State.ABORTED
