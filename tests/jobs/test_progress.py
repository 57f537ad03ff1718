"""The job's progress in its heartbeats: the stage the work entered and its file groups, done
out of planned, the done ones read from Spark's status tracker while its Spark job runs.

Without Spark: the progress object and the heartbeats against a stub API. On Spark: a job
whose tasks wait for the test, its counts read from the status tracker of its job group
(or of no group, as in a spark-submit application); then a real compaction run by a
resident worker against the real API, whose beats end with every planned file group done.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.api.conftest import batch, mor_writer
from tests.jobs.stub_api import OK_BEAT, spec_json, stub_api
from tests.jobs.test_runner import ENTRY, FakeSpark
from tests.worker import http
from tests.worker.test_resident_worker import _api_only, _register, _wait_done, _worker
from tms.hudi.table import HudiTable
from tms.jobs.client import JobClient, JobSpec
from tms.jobs.control import JobControl
from tms.jobs.job import Job
from tms.jobs.runner import EXIT_OK, JobRunner
from tms.serve import serve_in_thread
from tms.services import progress
from tms.services.execution import ServiceResult
from tms.services.spark import TaskInfo, run_tasks
from tms.spark_runtime import ensure_java
from tms.testing.sample_writer.new_table import create_table

DEADLINE = 120.0


def test_the_stage_keeps_the_last_spark_jobs_counts_and_done_never_goes_back() -> None:
    p = progress.Progress()
    assert p.snapshot() is None
    p.enter("compacting")
    assert p.snapshot() == progress.ProgressSnapshot("compacting", None, None)
    p.tasks_started(4)
    p.tasks_done(3)
    p.tasks_done(1)  # an older reading
    p.tasks_done(9)  # never past planned
    p.enter("committing")
    assert p.snapshot() == progress.ProgressSnapshot("committing", 4, 4)
    assert p.snapshot().to_dict() == {  # type: ignore[union-attr]
        "stage": "committing",
        "file_groups_done": 4,
        "file_groups_planned": 4,
    }
    p.tasks_started(2)
    assert p.snapshot() == progress.ProgressSnapshot("committing", 0, 2)


def test_services_report_only_inside_tracking() -> None:
    progress.enter("compacting")  # nobody listens: nothing happens
    p = progress.Progress()
    with progress.tracking(p):
        progress.enter("clustering")
        progress.tasks_started(5)
        progress.tasks_done(2)
    progress.enter("after")
    assert p.snapshot() == progress.ProgressSnapshot("clustering", 2, 5)


def _runner_routes(base_path: str, beats: list[Any], on_beat: Any = None) -> dict[str, Any]:
    def beat(body: Any) -> Any:
        beats.append(body)
        if on_beat is not None:
            on_beat(body)
        return OK_BEAT

    return {
        "GET /spec": [(200, spec_json(base_path=base_path, heartbeat_interval_seconds=0.05))],
        "POST /heartbeat": beat,
        "POST /instant": [(200, {})],
        "POST /result": [(200, {})],
    }


def test_heartbeats_carry_the_stages_and_the_last_one_where_the_work_ended(
    tmp_path: Path,
) -> None:
    """Planning, seen by a beat while the planner waits for it; the service's stages; and,
    although the work ends between two beats, a last beat with where it ended."""
    base = str(tmp_path / "trips")
    create_table(base, "trips", record_key_fields=["id"], ordering_field="ts")
    beats: list[Any] = []
    planning_seen = threading.Event()

    def on_beat(body: Any) -> None:
        if (body or {}).get("progress", {}).get("stage") == "planning":
            planning_seen.set()

    def plan(spec: JobSpec, table: HudiTable) -> str:
        assert planning_seen.wait(DEADLINE), "no heartbeat said planning"
        return "20250101000000001"

    def execute(job: Job, t: HudiTable, instant: str, s: Any, on_stage: Any) -> ServiceResult:
        progress.enter("compacting")
        progress.tasks_started(3)
        progress.tasks_done(3)
        progress.enter("committing")
        return ServiceResult("compaction", instant, file_groups=3)

    with stub_api(_runner_routes(base, beats, on_beat)) as api:
        with JobClient(api.url, 5, "tok", sleep=lambda _: None) as client:
            runner = JobRunner(
                client, plan=plan, execute=execute, spark_factory=lambda *_: FakeSpark()
            )
            assert runner.run() == EXIT_OK
        assert api.calls("POST /result")[0]["outcome"] == "SUCCEEDED"
    sent = [b["progress"] for b in beats if b and "progress" in b]
    assert sent[-1] == {"stage": "committing", "file_groups_done": 3, "file_groups_planned": 3}
    assert {"stage": "planning", "file_groups_done": None, "file_groups_planned": None} in sent
    assert all(b == {} or set(b) == {"progress"} for b in beats)


# On Spark -------------------------------------------------------------------------------------


def _wait_for_release(item: tuple[int, str], task: TaskInfo) -> int:
    """A task: the first two end at once, the others when the test writes the release file
    (tasks run in Python worker processes: a file is what they share with the test)."""
    number, release = item
    if number >= 2:
        deadline = time.monotonic() + DEADLINE
        while not Path(release).exists():
            assert time.monotonic() < deadline, "never released"
            time.sleep(0.05)
    return number


@pytest.mark.spark
@pytest.mark.parametrize("group", ["tms-attempt-progress-test", None])
def test_done_file_groups_come_from_the_status_tracker_while_the_spark_job_runs(
    spark: Any, tmp_path: Path, group: str | None
) -> None:
    """`None`: the jobs of no group, as in a spark-submit application (one attempt)."""
    release = tmp_path / "release"
    control = JobControl(job_group=group)
    control.attach_spark(spark)
    outcome: list[list[int]] = []

    def work() -> None:
        context = spark.sparkContext
        if group is not None:
            context.setJobGroup(group, "progress test", interruptOnCancel=True)
        else:
            context.setLocalProperty("spark.jobGroup.id", None)
        with progress.tracking(control.progress):
            progress.enter("compacting")
            items = [(n, str(release)) for n in range(4)]
            outcome.append(run_tasks(spark, _wait_for_release, items, "progress test"))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + DEADLINE
        now = control.progress_now()
        while now is None or now["file_groups_done"] != 2:
            assert time.monotonic() < deadline, f"two tasks never counted as done: {now}"
            time.sleep(0.1)
            now = control.progress_now()
        assert now == {"stage": "compacting", "file_groups_done": 2, "file_groups_planned": 4}
    finally:
        release.touch()
        thread.join(DEADLINE)
    assert outcome == [[0, 1, 2, 3]]
    assert control.progress_now() == {
        "stage": "compacting",
        "file_groups_done": 4,
        "file_groups_planned": 4,
    }
    # another group's reading does not count: a running job of another attempt is not ours
    other = JobControl(job_group="tms-attempt-someone-else")
    other.attach_spark(spark)
    assert progress.spark_file_groups_done(spark, "tms-attempt-someone-else", 4) is None


@pytest.mark.spark
def test_a_spark_submit_job_process_sends_its_progress(tmp_path: Path) -> None:
    """`python -m tms.jobs` in its own process, on its own Spark application, as
    spark-submit runs it (the entry script): it plans a compaction of a real table and its
    beats end with the plan's file groups all done."""
    writer = mor_writer(tmp_path, "trips", rows=40)
    writer.upsert(batch(range(0, 40, 3), ts=2))
    beats: list[Any] = []
    routes = _runner_routes(writer.table.base_path, beats)
    routes["GET /spec"] = [(200, spec_json(base_path=writer.table.base_path))]
    ensure_java()
    with stub_api(routes) as api:
        env = {**os.environ, "TMS_API_URL": api.url, "TMS_JOB_TOKEN": "tok"}
        done = subprocess.run(
            [sys.executable, str(ENTRY), "--attempt-id", "5"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        (result,) = api.calls("POST /result")
    assert done.returncode == EXIT_OK, done.stderr[-3000:]
    assert result["outcome"] == "SUCCEEDED", result
    planned = result["figures"]["file_groups"]
    sent = [b["progress"] for b in beats if b and "progress" in b]
    assert planned >= 1 and sent, beats
    assert sent[-1]["stage"] in ("committing", "syncing metadata")  # which others: the clock's
    counted = [p for p in sent if p["file_groups_planned"] is not None]
    assert counted and all(p["file_groups_planned"] == planned for p in counted)
    assert sent[-1]["file_groups_done"] == planned


@pytest.mark.spark
def test_a_compactions_heartbeats_count_its_plans_file_groups(
    spark: Any, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real compaction, run by a resident worker against the real API: its beats count
    the plan's file groups and end, after compacting, with all of them done; the attempt
    keeps the last progress. (Which beats fall in which stage is up to the clock.)"""
    beats: list[dict[str, Any]] = []
    lock = threading.Lock()
    heartbeat = JobClient.heartbeat

    def recording(self: JobClient, **kwargs: Any) -> Any:
        if kwargs.get("progress") is not None:
            with lock:
                beats.append(kwargs["progress"])
        return heartbeat(self, **kwargs)

    monkeypatch.setattr(JobClient, "heartbeat", recording)
    writer = mor_writer(tmp_path, "trips", rows=40)
    writer.upsert(batch(range(0, 40, 3), ts=2))
    with serve_in_thread(_api_only(db_url, tmp_path)) as service:
        url = service.url
        _register(url, "trips", writer.table.base_path)
        with _worker(url, spark, tmp_path):
            submitted = http.post(
                f"{url}/v1/hoodie/service/compact/submit",
                json={"db_name": "lake", "table_name": "trips"},
            ).json()
            done = _wait_done(url, submitted["id"])
        (attempt,) = http.get(f"{url}/v1/operations/{done['id']}/attempts").json()
    assert done["status"] == "COMPLETED", done
    planned = done["result"]["file_groups"]
    assert planned >= 1
    stages = [b["stage"] for b in beats]
    assert stages[-1] in ("committing", "syncing metadata")
    assert "compacting" not in stages[stages.index(stages[-1]) :]
    counted = [b for b in beats if b["file_groups_planned"] is not None]
    assert counted and all(b["file_groups_planned"] == planned for b in counted)
    assert beats[-1]["file_groups_done"] == planned
    assert attempt["progress"] == beats[-1]
    assert Path(attempt["log_path"]).exists()
