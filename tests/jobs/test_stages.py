"""Stages a service names while it runs: from `catch-up` on a cancel request no longer stops
the job (it finishes and reports SUCCEEDED), before it the cancel stops the work as for any
service. The stub API answers heartbeats by what the work has reached (events), so no test
depends on timing; execution is faked where Spark would run."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.stub_api import OK_BEAT, Reply, StubApi, spec_json, stub_api
from tms.hudi.metadata.indexing import IndexPartitionInfo, IndexPlan
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import delete_pending, request, transition
from tms.jobs.client import JobClient, JobSpec
from tms.jobs.control import JobControl, JobStopped
from tms.jobs.job import Job
from tms.jobs.runner import EXIT_FAILED, EXIT_OK, JobRunner, _roll_back_cancelled
from tms.services.execution import ServiceResult
from tms.testing.sample_writer.new_table import create_table

CANCEL_BEAT: Reply = (200, {"lease_expires_at": None, "cancel_requested": True})
INSTANT = "20250101000000001"


@pytest.fixture
def table(tmp_path: Path) -> str:
    base = str(tmp_path / "trips")
    create_table(base, "trips", record_key_fields=["id"], ordering_field="ts", table_version=9)
    return base


class FakeSpark:
    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.sparkContext = self
        self.applicationId = "local-7"

    def cancelAllJobs(self) -> None:
        self.cancelled.set()

    def stop(self) -> None:
        pass


def _cancel_once(reached: threading.Event) -> Any:
    """Heartbeat replies: a cancel request once the work reached a point, before it none."""
    return lambda body: CANCEL_BEAT if reached.is_set() else OK_BEAT


def _run(api: StubApi, control: JobControl, execute: Any, spark: FakeSpark) -> tuple[int, Any]:
    with JobClient(api.url, 5, "tok", sleep=lambda _: None) as client:
        runner = JobRunner(
            client,
            execute=execute,
            spark_factory=lambda spec, instant: spark,
            stop_grace_seconds=0.0,  # a cancel that stops the work would abandon it at once
            control=control,
        )
        code = runner.run()
    (result,) = api.calls("POST /result")
    return code, result


def _routes(table: str, beats: Any) -> dict[str, Any]:
    return {
        # the index build is the service whose catch-up and completion a cancel cannot stop
        "GET /spec": [(200, spec_json(base_path=table, instant=INSTANT, action="indexing"))],
        "POST /heartbeat": beats,
        "POST /result": [(200, {})],
    }


def test_a_cancel_during_catch_up_comes_too_late_and_the_work_succeeds(table: str) -> None:
    control, spark, in_catch_up = JobControl(), FakeSpark(), threading.Event()
    stages: list[str] = []

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> Any:
        for stage in ("build", "catch-up"):
            on_stage(stage)
            stages.append(stage)
        in_catch_up.set()
        assert control.cancel_too_late.wait(10), "the cancel request never came"
        on_stage("complete")
        stages.append("complete")
        return ServiceResult("compaction", instant, files_written=2)

    with stub_api(_routes(table, _cancel_once(in_catch_up))) as api:
        code, result = _run(api, control, execute, spark)
    assert code == EXIT_OK and stages == ["build", "catch-up", "complete"]
    assert result["outcome"] == "SUCCEEDED", result
    assert result["figures"]["cancel_too_late"] is True
    assert result["figures"]["files_written"] == 2
    assert not spark.cancelled.is_set() and not control.cancelled.is_set()


def test_a_cancel_during_the_build_stops_the_spark_work(table: str) -> None:
    control, spark, in_build = JobControl(), FakeSpark(), threading.Event()

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> Any:
        on_stage("build")
        in_build.set()
        assert spark.cancelled.wait(10), "the cancel never reached the Spark jobs"
        raise RuntimeError("Job 4 cancelled as part of cancellation of all jobs")

    with stub_api(_routes(table, _cancel_once(in_build))) as api:
        code, result = _run(api, control, execute, spark)
    assert code == EXIT_OK and result["outcome"] == "CANCELLED", result
    assert not control.cancel_too_late.is_set()


def test_a_cancel_between_build_and_catch_up_stops_at_catch_up(table: str) -> None:
    """The build finished before the cancel stopped anything: entering catch-up raises, so
    the service aborts what it built instead of going on."""
    control, spark, built = JobControl(), FakeSpark(), threading.Event()
    refused: list[JobStopped] = []

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> Any:
        on_stage("build")
        built.set()
        assert control.cancelled.wait(10), "the cancel request never came"
        try:
            on_stage("catch-up")
        except JobStopped as exc:
            refused.append(exc)
            raise
        raise AssertionError("catch-up must not start after a cancel")

    with stub_api(_routes(table, _cancel_once(built))) as api:
        code, result = _run(api, control, execute, spark)
    assert code == EXIT_OK and len(refused) == 1 and result["outcome"] == "CANCELLED", result
    assert control.held is None


def _pending_indexing(base: str) -> HudiTable:
    hudi_table = HudiTable.open(base)
    storage, config = hudi_table.storage, hudi_table.config
    plan = IndexPlan((IndexPartitionInfo("record_index", INSTANT, None),)).to_bytes()
    requested = request(storage, config, INSTANT, Action.INDEXING, plan)
    transition(storage, config, requested, State.INFLIGHT)
    return HudiTable.open(base)


def test_a_cancelled_index_build_goes_with_its_plan(table: str) -> None:
    """A cancelled compaction goes back to requested, to run again; a cancelled index build
    leaves nothing, its plan included (a failed one keeps its plan for the retry)."""
    spec = JobSpec.from_json(spec_json(base_path=table, action="indexing", instant=INSTANT))
    hudi_table = _pending_indexing(table)
    _roll_back_cancelled(Job.of(spec), hudi_table, INSTANT)
    assert HudiTable.open(table).timeline().get(INSTANT) is None

    hudi_table = _pending_indexing(table)
    as_compaction = JobSpec.from_json(spec_json(base_path=table, instant=INSTANT))
    _roll_back_cancelled(Job.of(as_compaction), hudi_table, INSTANT)
    after = HudiTable.open(table).timeline()
    gone = after.get(INSTANT)
    assert gone is None or gone.state is not State.INFLIGHT


@pytest.mark.parametrize("aborted", [True, False])
def test_a_failed_execution_whose_plan_was_aborted_is_not_retried(
    table: str, aborted: bool
) -> None:
    """An index build that fails removes its plan; retrying the operation could only find
    nothing to run, so the failure is final (with its own error). A plan still there (a
    failure that left it pending) is retried as before."""
    hudi_table = _pending_indexing(table)
    control, spark = JobControl(), FakeSpark()

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> Any:
        on_stage("build")
        if aborted:
            pending = hudi_table.timeline().get(instant)
            assert pending is not None
            delete_pending(hudi_table.storage, hudi_table.config, pending)
        raise RuntimeError("the build failed")

    with stub_api(_routes(table, [OK_BEAT])) as api:
        code, result = _run(api, control, execute, spark)
    assert code == EXIT_FAILED and result["outcome"] == "FAILED"
    assert "RuntimeError: the build failed" in result["error"]
    assert result["retryable"] is not aborted
    assert ("was aborted: submit again" in result["error"]) is aborted
