"""A compaction on a Spark standalone cluster that loses a worker while its tasks run.

`tms serve` submits the job to `spark://` (a master and two one-core workers started by the
test; each executor a JVM of its own); once a task has written its base file and waits
before reporting (`tms.testing.task_pause`), the worker running it is SIGKILLed with its
executor. Spark runs the task again on the other worker, the attempt completes, the table
reads the same through hudi-rs, and the killed task's file is neither committed nor left on
storage. The full matrix (every service, both engines) is `bench/cluster_faults.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import TERMINAL, Services
from tests.e2e.test_service_e2e import new_table, rows, slices_with_logs, trips
from tests.spark_cluster import SparkCluster, committed_files, table_files, written_by
from tms.hudi.table import HudiTable

pytestmark = pytest.mark.spark


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SparkCluster]:
    started = SparkCluster(tmp_path / "spark")
    try:
        yield started.start()
    finally:
        started.close()


def test_a_compaction_survives_the_loss_of_a_spark_worker_mid_task(
    services: Services, cluster: SparkCluster, tmp_path: Path
) -> None:
    service = services.start("a", spark_master=cluster.master_url)
    writer = new_table(tmp_path, "trips", max_file_rows=20)
    writer.insert(trips(range(60), ts=1))
    writer.upsert(trips(range(0, 60, 2), ts=2))
    base = writer.table.base_path
    before, to_compact = rows(base), slices_with_logs(base)
    assert len(to_compact) >= 3  # more tasks than the two executors run at once
    files_before = table_files(base)
    service.post(
        "/v1/hoodie/service/register",
        {"db_name": "lake", "table_name": "trips", "base_path": base},
    )
    submitted = service.post(
        "/v1/hoodie/service/compact/submit", {"db_name": "lake", "table_name": "trips"}
    )

    def still_running() -> None:
        operation = service.operation(submitted["id"])
        assert operation["status"] not in TERMINAL, operation["last_error"]

    paused = cluster.wait_for_paused_task(timeout=240, check=still_running)
    running = service.operation(submitted["id"])
    assert running["status"] == "RUNNING" and running["instant"], running
    instant = running["instant"]
    new_files = table_files(base) - files_before
    killed_files = {path for path in new_files if written_by(path, {paused.write_token})}
    assert killed_files, new_files  # the paused task wrote its base file, not yet reported
    cluster.kill_worker_of(paused)
    cluster.release()

    operation = service.wait_terminal(submitted["id"], timeout=300)
    assert operation["status"] == "COMPLETED", operation["last_error"]
    [attempt] = service.attempts(submitted["id"])  # Spark, not tms, ran the task again
    assert attempt["outcome"] == "SUCCEEDED"
    assert attempt["figures"]["file_groups"] == len(to_compact)
    assert cluster.reruns(paused), cluster.tasks()

    assert rows(base) == before
    assert slices_with_logs(base) == []
    table = HudiTable.open(base)
    timeline = table.timeline()
    compacted = timeline.get(instant)
    assert compacted is not None and compacted.is_completed
    written = timeline.commit_metadata(compacted).file_paths_written()
    assert len(written) == len(to_compact)
    assert not killed_files & committed_files(base)
    assert not killed_files & table_files(base)  # reconciled: deleted
    assert all((Path(base) / path).is_file() for path in written)
    assert not (Path(base) / ".hoodie" / ".temp" / instant).exists()
