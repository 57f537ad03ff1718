"""`tms serve` with `TMS_WORKERS=1` starts a resident worker process (`tms worker`) that
registers and runs the operations left to choose their engine. A worker killed with SIGKILL
while it runs an attempt loses that attempt's lease: the attempt is LOST and the operation is
retried (by spark-submit while no worker is alive, or by the worker started again), and the
table reads the same through hudi-rs; the service starts the worker again. The attempt is
held on the table lock while the worker is killed, so the kill always lands while it runs."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.worker import http
from tests.worker.test_resident_worker import _table, _wait_done
from tms.config import load_settings
from tms.hudi.locks import FileSystemLock
from tms.hudi.table import HudiTable
from tms.serve import free_port, serve_in_thread
from tms.serve_workers import WorkerProcesses

pytestmark = pytest.mark.spark


def _until(what: str, check: Any, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_killed_worker_loses_its_attempt_and_the_operation_runs_elsewhere(
    db_url: str, tmp_path: Path
) -> None:
    settings = load_settings(
        config_file=False,
        environ={},
        database_url=db_url,
        data_dir=tmp_path / "data",
        port=free_port(),
        workers=1,
        pull_listings_per_minute=0,
        worker_slots=1,
        spark_master="local[1]",
        scheduler_interval_seconds=0.2,
        heartbeat_interval_seconds=1,
        lease_seconds=10,
        worker_timeout_seconds=3,
        retry_base_seconds=0,
        retry_jitter=0,
        compaction_delta_commits=0,
        clean_commits=0,
    )
    base = _table(tmp_path, "trips")
    before = oracle.snapshot(base)
    table = HudiTable.open(base)
    with serve_in_thread(settings) as service:
        url = service.url
        processes: WorkerProcesses = service.server.config.app.state.worker_processes  # type: ignore[attr-defined]
        (process,) = processes.processes
        (worker,) = _until("the worker to register", lambda: http.get(f"{url}/v1/workers").json())
        assert worker["pid"] == process.pid and worker["alive"]
        registered = http.post(
            f"{url}/v1/tables",
            json={"db_name": "lake", "table_name": "trips", "base_path": base},
        )
        assert registered.status_code == 201, registered.text
        with FileSystemLock(table.storage, owner="test"):  # the attempt waits on it
            operation = http.post(
                f"{url}/v1/hoodie/service/compact/submit",
                json={"db_name": "lake", "table_name": "trips"},
            ).json()
            attempts_url = f"{url}/v1/operations/{operation['id']}/attempts"
            (first,) = _until("the worker's attempt", lambda: http.get(attempts_url).json())
            assert (first["engine"], first["worker_id"]) == ("spark-worker", worker["id"])
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            _until(
                "the attempt to be lost",
                lambda: http.get(attempts_url).json()[0]["outcome"] == "LOST",
                timeout=120,
            )
        done = _wait_done(url, operation["id"])
        attempts = http.get(attempts_url).json()
        revived = _until(
            "the worker to be started again and register",
            lambda: [
                w
                for w in http.get(f"{url}/v1/workers").json()
                if w["alive"] and w["pid"] == processes.processes[0].pid != process.pid
            ],
        )
    assert done["status"] == "COMPLETED", done
    assert (attempts[0]["outcome"], attempts[0]["engine"]) == ("LOST", "spark-worker")
    # the retry runs wherever it is claimed first: by spark-submit while no worker is alive,
    # or by the worker the service started again
    assert [a["outcome"] for a in attempts] == ["LOST", "SUCCEEDED"]
    assert revived and processes.exit_codes() == [-signal.SIGKILL]
    assert oracle.snapshot(base).equals(before)
    assert "commit" in {action for _, action in oracle.completed_instants(base)}
