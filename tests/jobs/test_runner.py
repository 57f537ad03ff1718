"""The job's control flow against a stub API: what it reports, and when it stops at once.
Execution is faked where Spark would run; the full path (real API, spark-submit, table) is
the end-to-end test's."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.stub_api import OK_BEAT, StubApi, spec_json, stub_api
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.jobs.client import JobClient, JobSpec
from tms.jobs.job import Job
from tms.jobs.runner import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STOPPED,
    EXIT_UNREPORTED,
    EXIT_USAGE,
    JobRunner,
)
from tms.services.execution import ServiceResult
from tms.spark_runtime import ensure_java
from tms.testing.sample_writer.new_table import create_table

ENTRY = Path(__file__).resolve().parents[2] / "src" / "tms" / "jobs" / "entry.py"


@pytest.fixture
def table(tmp_path: Path) -> str:
    base = str(tmp_path / "trips")
    create_table(base, "trips", record_key_fields=["id"], ordering_field="ts")
    return base


class FakeSpark:
    """Just enough of a SparkSession for the runner: cancel and app id."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.stopped = False
        self.sparkContext = self
        self.applicationId = "local-123"

    def cancelAllJobs(self) -> None:
        self.cancelled.set()

    def stop(self) -> None:
        self.stopped = True


def no_spark(spec: JobSpec, instant: str) -> Any:
    raise AssertionError("Spark must not start")


def run(api: StubApi, **kwargs: Any) -> tuple[int, JobRunner]:
    with JobClient(api.url, 5, "tok", sleep=lambda _: None) as client:
        runner = JobRunner(client, **kwargs)
        return runner.run(), runner


def results(api: StubApi) -> list[Any]:
    return api.calls("POST /result")


def routes(spec: dict[str, Any], beats: Any = None) -> dict[str, Any]:
    return {
        "GET /spec": [(200, spec)],
        "POST /heartbeat": beats or [OK_BEAT],
        "POST /instant": [(200, {})],
        "POST /result": [(200, {})],
    }


@pytest.fixture
def blocker() -> Iterator[threading.Event]:
    """Released at the end of the test, so abandoned work threads end too."""
    event = threading.Event()
    yield event
    event.set()


def test_lost_lease_stops_at_once_without_reporting(table: str, blocker: threading.Event) -> None:
    def plan(job: Job, t: HudiTable) -> str | None:
        blocker.wait(60)  # stuck in the work
        return None

    beats = [OK_BEAT, (409, {"detail": "lease lost"})]
    with stub_api(routes(spec_json(base_path=table), beats)) as api:
        started = time.monotonic()
        code, runner = run(api, plan=plan, spark_factory=no_spark)
    assert code == EXIT_STOPPED and runner.abandoned_work
    assert time.monotonic() - started < 5
    assert results(api) == [] and api.calls("POST /instant") == []


def test_a_job_cut_off_from_its_service_for_a_lease_stops_without_reporting(
    table: str, blocker: threading.Event
) -> None:
    """Its service died (or the network is cut): nobody can tell it the lease is lost, so
    once no heartbeat was answered for a lease, it stops as if told; another attempt may
    run the operation by then."""

    def plan(job: Job, t: HudiTable) -> str | None:
        blocker.wait(60)  # stuck in the work
        return None

    beats = [OK_BEAT, (503, {})]  # every beat after the first fails
    spec = spec_json(base_path=table, heartbeat_interval_seconds=0.2, lease_seconds=1.5)
    with stub_api(routes(spec, beats)) as api:
        started = time.monotonic()
        code, runner = run(api, plan=plan, spark_factory=no_spark)
        stopped = time.monotonic() - started
        assert code == EXIT_STOPPED and runner.abandoned_work
        assert 1.5 <= stopped < 10, stopped
        assert results(api) == [] and api.calls("POST /instant") == []


def test_missed_heartbeats_within_the_lease_do_not_stop_the_job(table: str) -> None:
    beats = [OK_BEAT, *[(503, {})] * 9, OK_BEAT]  # three beats of three requests fail
    spec = spec_json(base_path=table, heartbeat_interval_seconds=0.05, lease_seconds=30)

    def plan(job: Job, t: HudiTable) -> str | None:
        deadline = time.monotonic() + 10
        while len(api.calls("POST /heartbeat")) < 12 and time.monotonic() < deadline:
            time.sleep(0.02)
        return None

    with stub_api(routes(spec, beats)) as api:
        code, _ = run(api, plan=plan, spark_factory=no_spark)
    assert code == EXIT_OK
    assert [r["outcome"] for r in results(api)] == ["SUCCEEDED"]


def test_scheduled_plan_is_reported_then_executed(table: str) -> None:
    spark = FakeSpark()
    seen: list[str] = []

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> ServiceResult:
        seen.append(instant)
        return ServiceResult("compaction", instant, files_written=3, records_written=30)

    with stub_api(routes(spec_json(base_path=table))) as api:
        code, _ = run(
            api,
            plan=lambda spec, t: "20250101000000001",
            execute=execute,
            spark_factory=lambda spec, instant: spark,
        )
    assert code == EXIT_OK and seen == ["20250101000000001"]
    assert api.calls("POST /instant") == [{"instant": "20250101000000001"}]
    (result,) = results(api)
    assert result["outcome"] == "SUCCEEDED" and result["spark_app_id"] == "local-123"
    assert result["figures"]["files_written"] == 3 and result["figures"]["records_written"] == 30
    assert spark.stopped


def test_nothing_to_schedule_succeeds_without_spark(table: str) -> None:
    with stub_api(routes(spec_json(base_path=table))) as api:
        code, _ = run(api, spark_factory=no_spark)  # the real planner: no log files yet
    assert code == EXIT_OK
    assert results(api)[0]["outcome"] == "SUCCEEDED"
    assert results(api)[0]["figures"]["nothing_to_do"] is True
    assert api.calls("POST /instant") == []


def test_vanished_plan_is_invalid(table: str) -> None:
    spec = spec_json(base_path=table, instant="20990101000000000")
    with stub_api(routes(spec)) as api:
        code, _ = run(api, spark_factory=lambda spec, instant: FakeSpark())
    assert code == EXIT_OK
    (result,) = results(api)
    assert result["outcome"] == "INVALID" and result["retryable"] is False
    assert "no compaction plan at instant 20990101000000000" in result["error"]


@pytest.mark.parametrize(
    ("overrides", "retryable", "text"),
    [
        ({"base_path": "/no/such/table"}, True, "TableNotFoundError"),
        ({"action": "vacuum"}, False, "action 'vacuum' is not supported"),
        ({"action": "clean", "extra_params": {"retained": "many"}}, False, "retained"),
    ],
)
def test_failures_say_whether_a_retry_can_help(
    table: str, overrides: dict[str, Any], retryable: bool, text: str
) -> None:
    spec = spec_json(**{"base_path": table, **overrides})
    with stub_api(routes(spec)) as api:
        code, _ = run(api, spark_factory=no_spark)
    assert code == EXIT_FAILED
    (result,) = results(api)
    assert result["outcome"] == "FAILED" and result["retryable"] is retryable
    assert text in result["error"]


def test_a_failure_reports_its_class_and_message_and_logs_its_traceback(
    table: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The error every viewer reads names no installation path; the job's log (the
    attempt's log file) keeps the traceback."""

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> ServiceResult:
        raise RuntimeError("executor lost\n\tat org.apache.spark.Executor.run(Executor.java:1)")

    spec = spec_json(base_path=table, instant="20250101000000001")
    with caplog.at_level("ERROR", logger="tms.jobs.runner"), stub_api(routes(spec)) as api:
        code, _ = run(api, execute=execute, spark_factory=lambda spec, instant: FakeSpark())
    assert code == EXIT_FAILED
    (result,) = results(api)
    assert result["outcome"] == "FAILED"
    assert result["error"].startswith("RuntimeError: executor lost")  # its plan is gone: (…)
    assert "\n" not in result["error"] and "Executor.java" not in result["error"]
    assert "Traceback (most recent call last)" in caplog.text and __file__ in caplog.text


def test_cancel_request_cancels_the_spark_work(table: str) -> None:
    spark = FakeSpark()

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> ServiceResult:
        assert spark.cancelled.wait(10), "the heartbeat never cancelled the Spark jobs"
        raise RuntimeError("Job 3 cancelled as part of cancellation of all jobs")

    beats = [OK_BEAT, (200, {"lease_expires_at": None, "cancel_requested": True})]
    spec = spec_json(base_path=table, instant="20250101000000001")
    with stub_api(routes(spec, beats)) as api:
        code, _ = run(api, execute=execute, spark_factory=lambda spec, instant: spark)
    assert code == EXIT_OK
    assert [r["outcome"] for r in results(api)] == ["CANCELLED"]


def test_cancel_before_start_and_refused_spec(table: str) -> None:
    with stub_api(routes(spec_json(base_path=table, cancel_requested=True))) as api:
        assert run(api, spark_factory=no_spark)[0] == EXIT_OK
    assert results(api)[0]["outcome"] == "CANCELLED"
    with stub_api({"GET /spec": [(401, {"detail": "bad token"})]}) as api:
        assert run(api)[0] == EXIT_STOPPED


def test_refused_instant_stops_the_job(table: str) -> None:
    api_routes = routes(spec_json(base_path=table))
    api_routes["POST /instant"] = [(409, {"detail": "attempt no longer current"})]
    with stub_api(api_routes) as api:
        code, _ = run(api, plan=lambda spec, t: "20250101000000001", spark_factory=no_spark)
    assert code == EXIT_STOPPED and results(api) == []


def test_unreported_result_exits_non_zero(table: str) -> None:
    api_routes = routes(spec_json(base_path=table))
    api_routes["POST /result"] = [(503, {})]
    with stub_api(api_routes) as api:
        code, _ = run(api, spark_factory=no_spark)
    assert code == EXIT_UNREPORTED and len(results(api)) == 11


def _script(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    ensure_java()
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_entry_script_runs_as_spark_submit_would(table: str) -> None:
    """`entry.py` run as a file (its folder first on sys.path) reaches the API."""
    usage = _script([str(ENTRY), "--attempt-id", "5"], {"PATH": "/usr/bin:/bin"})
    assert usage.returncode == EXIT_USAGE and "TMS_JOB_TOKEN" in usage.stderr
    with stub_api({"GET /spec": [(409, {"detail": "attempt 5 is no longer current"})]}) as api:
        env = {"PATH": "/usr/bin:/bin", "TMS_API_URL": api.url, "TMS_JOB_TOKEN": "tok"}
        gone = _script([str(ENTRY), "--attempt-id", "5"], env)
    assert gone.returncode == EXIT_STOPPED, gone.stderr
    assert "no longer current" in gone.stderr
    assert api.requests[0][2] == "Bearer tok"


def test_a_pending_plan_no_operation_tracks_is_adopted_not_replanned(table: str) -> None:
    """A job that planned and died before reporting left this plan; the next one runs it."""
    seen: list[str] = []

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> ServiceResult:
        seen.append(instant)
        return ServiceResult("compaction", instant)

    def must_not_plan(job: Job, t: HudiTable) -> str | None:
        raise AssertionError("an orphaned plan exists: no new plan")

    orphan = "20250101000000009"
    with stub_api(routes(spec_json(base_path=table))) as api:
        code, _ = run(
            api,
            plan=must_not_plan,
            pending=lambda t, action: [orphan],
            execute=execute,
            spark_factory=lambda spec, instant: FakeSpark(),
        )
    assert code == EXIT_OK and seen == [orphan]
    assert api.calls("POST /instant") == [{"instant": orphan}]


def test_a_pending_plan_another_operation_tracks_is_left_to_it(table: str) -> None:
    taken = (409, {"error": {"code": "operation_conflict", "message": "taken"}})
    api_routes = routes(spec_json(base_path=table))
    api_routes["POST /instant"] = lambda body: (
        taken if body["instant"] == "20250101000000009" else (200, {})
    )
    seen: list[str] = []

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> ServiceResult:
        seen.append(instant)
        return ServiceResult("compaction", instant)

    with stub_api(api_routes) as api:
        code, _ = run(
            api,
            plan=lambda spec, t: "20250101000000010",
            pending=lambda t, action: ["20250101000000009"],
            execute=execute,
            spark_factory=lambda spec, instant: FakeSpark(),
        )
    assert code == EXIT_OK and seen == ["20250101000000010"]
    assert [c["instant"] for c in api.calls("POST /instant")] == [
        "20250101000000009",
        "20250101000000010",
    ]


def test_pending_plans_lists_the_timelines_pending_plans_of_the_action(table: str) -> None:
    from tms.hudi.avro import codec as avro_codec
    from tms.hudi.timeline.transitions import request
    from tms.jobs.dispatch import pending_plans

    hudi_table = HudiTable.open(table)
    plan = avro_codec.encode("HoodieCompactionPlan", {"operations": [], "version": 2})
    request(hudi_table.storage, hudi_table.config, "20250101000000005", Action.COMPACTION, plan)
    assert pending_plans(hudi_table, "compaction") == ["20250101000000005"]
    assert pending_plans(hudi_table, "clean") == []
