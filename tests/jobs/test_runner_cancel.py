"""Cancels that reach a job (RFC-79): a cancel request a writer leaves on the table stops the
job of a cancellable plan within a heartbeat; an operator's cancel of a cancellable plan is
written on the table, so writers see it, and the plan ends aborted; a plan that is not
cancellable goes back to requested to run again. The table is real; only Spark is stood in
for, since the heartbeat, not the work, is under test."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.stub_api import OK_BEAT, spec_json, stub_api
from tests.jobs.test_runner import FakeSpark, results, routes, run
from tests.services.test_clean_rollbacks import clustering_plan, state_of
from tests.services.test_clustering import small_files_table
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests
from tms.hudi.timeline.instant import State
from tms.jobs.job import Job
from tms.jobs.runner import EXIT_FAILED, EXIT_OK
from tms.services.compaction.execute import schedule_compaction
from tms.services.execution import ServiceResult

CANCEL_BEAT = (200, {"lease_expires_at": None, "cancel_requested": True})


def waits_for_cancel(spark: FakeSpark, on_start: Any = None) -> Any:
    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> ServiceResult:
        if on_start is not None:
            on_start()
        assert spark.cancelled.wait(10), "nothing cancelled the Spark jobs"
        raise RuntimeError("Job 1 cancelled as part of cancellation of all jobs")

    return execute


def test_a_cancel_request_on_the_table_stops_the_job_and_aborts_the_plan(tmp_path: Path) -> None:
    base, instant = clustering_plan(tmp_path)
    storage = HudiTable.open(base).storage
    spark = FakeSpark()

    def writer_cancels() -> None:  # as a Hudi writer would: a file in .hoodie/.cancel
        storage.write_bytes(cancel_requests.cancel_path(instant), b"")

    spec = spec_json(base_path=base, action="clustering", instant=instant)
    with stub_api(routes(spec, [OK_BEAT])) as api:
        code, _ = run(
            api,
            execute=waits_for_cancel(spark, writer_cancels),
            spark_factory=lambda spec, instant: spark,
        )
    assert code == EXIT_OK
    (result,) = results(api)
    assert result["outcome"] == "CANCELLED"
    assert f".hoodie/.cancel/{instant}" in result["error"]
    assert state_of(base, instant) is State.ABORTED
    assert cancel_requests.cancel_requests(storage) == []


def test_an_operator_cancel_of_a_cancellable_plan_is_written_on_the_table(tmp_path: Path) -> None:
    base, instant = clustering_plan(tmp_path)
    spark = FakeSpark()
    spec = spec_json(base_path=base, action="clustering", instant=instant)
    with stub_api(routes(spec, [OK_BEAT, CANCEL_BEAT])) as api:
        code, _ = run(api, execute=waits_for_cancel(spark), spark_factory=lambda s, i: spark)
    assert code == EXIT_OK
    (result,) = results(api)
    assert result["outcome"] == "CANCELLED" and result["error"] == "cancelled by request"
    assert state_of(base, instant) is State.ABORTED


def test_an_operator_cancel_of_a_plan_that_is_not_cancellable_keeps_the_plan(
    tmp_path: Path,
) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, rows=240, table_version=9)
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    spark = FakeSpark()
    spec = spec_json(base_path=base, action="compaction", instant=instant)
    with stub_api(routes(spec, [OK_BEAT, CANCEL_BEAT])) as api:
        code, _ = run(api, execute=waits_for_cancel(spark), spark_factory=lambda s, i: spark)
    assert code == EXIT_OK
    assert results(api)[0]["outcome"] == "CANCELLED"
    assert state_of(base, instant) is State.REQUESTED, "it runs again later"
    assert cancel_requests.cancel_requests(HudiTable.open(base).storage) == []


def test_a_lock_provider_tms_cannot_take_fails_the_job_for_good(tmp_path: Path) -> None:
    base, instant = clustering_plan(tmp_path)
    provider = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
    spec = spec_json(
        base_path=base,
        action="clustering",
        instant=instant,
        extra_params={"hoodie.write.lock.provider": provider},
    )
    with stub_api(routes(spec, [OK_BEAT])) as api:
        code, _ = run(api, spark_factory=lambda s, i: FakeSpark())
    assert code == EXIT_FAILED
    (result,) = results(api)
    assert result["outcome"] == "FAILED" and result["retryable"] is False
    assert "ZooKeeper" in result["error"] and provider in result["error"]
    assert state_of(base, instant) is State.REQUESTED, "nothing was written"


class SharedSpark:
    """The test session's Spark, which the job may cancel but must not stop."""

    def __init__(self, spark: Any) -> None:
        self._session = spark

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def stop(self) -> None:
        return None


def make_clustering_stuck(monkeypatch: pytest.MonkeyPatch, finished: Path) -> None:
    """Clustering's Spark work starts with a task that sleeps for ten minutes, then writes
    `finished`: only a cancel of its Spark job stops it in time."""
    import tms.services.plan_executor as executor_module

    real = executor_module.run_tasks

    def stuck_then_real(spark_session: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("description", "").startswith("tms clustering "):
            return real(spark_session, *args, **kwargs)  # another service's tasks

        def stuck(_: int, flag: str = str(finished)) -> int:
            import time

            time.sleep(600)
            Path(flag).write_text("finished")
            return 0

        spark_session.sparkContext.parallelize([0], 1).map(stuck).collect()
        return real(spark_session, *args, **kwargs)

    monkeypatch.setattr(executor_module, "run_tasks", stuck_then_real)


@pytest.mark.spark
def test_a_writers_cancel_file_stops_a_running_clustering_on_spark(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clustering's Spark job is stuck in a task: the heartbeat that finds the cancel
    file cancels it (the task never finishes), and the plan ends aborted."""
    base, instant = clustering_plan(tmp_path)
    storage = HudiTable.open(base).storage
    finished = tmp_path / "stuck-task-finished"
    make_clustering_stuck(monkeypatch, finished)

    def writer_cancels_once_stuck() -> None:
        tracker = spark.sparkContext.statusTracker()
        while not tracker.getActiveJobsIds():
            threading.Event().wait(0.05)
        storage.write_bytes(cancel_requests.cancel_path(instant), b"")  # as a Hudi writer does

    watcher = threading.Thread(target=writer_cancels_once_stuck, daemon=True)
    watcher.start()
    spec = spec_json(base_path=base, action="clustering", instant=instant)
    with stub_api(routes(spec, [OK_BEAT])) as api:
        code, runner = run(api, spark_factory=lambda s, i: SharedSpark(spark))
    watcher.join(10)
    assert code == EXIT_OK and not runner.abandoned_work
    (result,) = results(api)
    assert result["outcome"] == "CANCELLED"
    assert f".hoodie/.cancel/{instant}" in result["error"]
    assert not finished.exists(), "the stuck task was cancelled, not waited for"
    assert state_of(base, instant) is State.ABORTED
