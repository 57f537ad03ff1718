"""`tms demo`, small: the embedded service, callbacks, policy compaction and a clean on
real Spark, checked by the oracle."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tms.cli import app
from tms.demo import (
    DemoReport,
    DemoWriter,
    ResidentWorker,
    Watcher,
    await_worker,
    callback_payload,
    data_files,
    describe_progress,
    keep_running,
    wait_for_stop,
)
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import Storage
from tms.verify import oracle_snapshot


def test_the_callback_payload_is_what_a_released_hudi_writer_posts(tmp_path: Path) -> None:
    base = str(tmp_path / "trips")
    writer = DemoWriter(base, rows=200, total_commits=3)
    writer.commit()
    upsert, what = writer.commit()
    assert what == "updated 20 trips"

    payload = callback_payload(base, upsert)
    assert set(payload) == {
        "commitTime", "tableName", "basePath", "hoodieWriteStat", "commitActionType",
        "extraMetadata",
    }  # fmt: skip
    assert (payload["commitTime"], payload["tableName"], payload["basePath"]) == (
        upsert,
        "demo_trips",
        base,
    )
    assert payload["commitActionType"] == {"present": True}
    assert payload["extraMetadata"] == {"present": True}
    stats = payload["hoodieWriteStat"]
    assert stats and all(s["prevCommit"] and s["partitionPath"] for s in stats)
    assert all(s["logFiles"] and ".log." in s["path"] for s in stats)  # a merge-on-read update
    assert sum(s["numUpdateWrites"] for s in stats) == 20


def test_a_running_attempts_progress_in_one_line() -> None:
    attempt = {
        "number": 1,
        "log_path": "/srv/tms/logs/3/7.log",
        "progress": {"stage": "compacting", "file_groups_done": 2, "file_groups_planned": 4},
    }
    assert describe_progress("compaction", 3, attempt) == (
        "compaction #3 attempt 1: compacting, 2/4 file groups  (log: /srv/tms/logs/3/7.log)"
    )
    one = {"number": 2, "progress": {"stage": "committing", "file_groups_planned": 1}}
    assert describe_progress("clustering", 5, one) == (
        "clustering #5 attempt 2: committing, ?/1 file group"
    )
    planning = {"number": 1, "progress": {"stage": "planning", "file_groups_done": None}}
    assert describe_progress("clean", 4, planning) == "clean #4 attempt 1: planning"
    assert describe_progress("clean", 4, {"number": 1, "progress": None}) is None


class _FakeApi:
    """The table's operations and attempts as the API returns them, one poll at a time:
    each call of `operations` moves to the next state."""

    def __init__(self, states: list[tuple[str, dict[str, Any] | None, str]]) -> None:
        self.states = states
        self.index = -1

    def _now(self) -> tuple[str, dict[str, Any] | None, str]:
        return self.states[max(self.index, 0)]

    def operations(self, **_: Any) -> list[dict[str, Any]]:
        self.index = min(self.index + 1, len(self.states) - 1)
        status, _, _ = self._now()
        return [{"id": 3, "action": "compaction", "status": status, "run_times": 1}]

    def operation(self, operation_id: int) -> dict[str, Any]:
        return {"events": [{"reason": "policy: 3 delta commits"}]}

    def attempts(self, operation_id: int) -> list[dict[str, Any]]:
        _, progress, outcome = self._now()
        return [
            {
                "id": 7,
                "number": 1,
                "engine": "spark-worker",
                "outcome": outcome,
                "log_path": "/srv/logs/3/7.log",
                "progress": progress,
                "duration_seconds": 4.0,
                "figures": {"file_groups": 4, "files_written": 4},
            }
        ]


def _progress(stage: str, done: int | None, planned: int | None) -> dict[str, Any]:
    return {"stage": stage, "file_groups_done": done, "file_groups_planned": planned}


def test_the_watcher_prints_each_change_of_a_running_attempts_progress_once() -> None:
    api = _FakeApi(
        [
            ("RUNNING", None, "RUNNING"),
            ("RUNNING", _progress("planning", None, None), "RUNNING"),
            ("RUNNING", _progress("compacting", 0, 4), "RUNNING"),
            ("RUNNING", _progress("compacting", 0, 4), "RUNNING"),
            ("RUNNING", _progress("compacting", 2, 4), "RUNNING"),
            ("RUNNING", _progress("committing", 4, 4), "RUNNING"),
            ("COMPLETED", _progress("committing", 4, 4), "SUCCEEDED"),
        ]
    )
    lines: list[str] = []
    watcher = Watcher(api, lines.append, time.monotonic(), 0.0)  # type: ignore[arg-type]
    assert watcher.wait_idle(1, timeout=60)
    text = [line.split("] ", 1)[1] for line in lines]
    log = "  (log: /srv/logs/3/7.log)"
    assert text == [
        "operation 3 compaction: SCHEDULED (policy: 3 delta commits)",
        "operation 3 compaction: RUNNING, attempt 1 (spark-worker)",
        "compaction #3 attempt 1: planning" + log,
        "compaction #3 attempt 1: compacting, 0/4 file groups" + log,
        "compaction #3 attempt 1: compacting, 2/4 file groups" + log,
        "compaction #3 attempt 1: committing, 4/4 file groups" + log,
        "operation 3 compaction: COMPLETED in 4.0s (spark-worker): 4 file groups, 4 files written"
        " (0 records), 0 log files compacted",
    ]


class _Workers:
    """`GET /v1/workers` as the service answers it, one poll at a time."""

    def __init__(self, *answers: list[dict[str, Any]]) -> None:
        self.answers = list(answers)

    def workers(self) -> list[dict[str, Any]]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_the_demo_writes_once_a_live_worker_serves_the_tables_queue() -> None:
    other = {"id": "w-other", "alive": True, "queues": ["etl"]}
    silent = {"id": "w-silent", "alive": False, "queues": ["default"]}
    ready = {"id": "w-1", "alive": True, "queues": ["default"]}
    api = _Workers([], [other, silent], [other, ready])
    lines: list[str] = []
    worker = ResidentWorker(list, Path("/srv/tms/logs/worker/worker-0.log"))
    assert await_worker(api, worker, "default", 600, 0, lines.append)  # type: ignore[arg-type]
    assert lines[0] == "  waiting for the resident Spark worker to start (its SparkSession)..."
    assert re.fullmatch(
        r"  the resident Spark worker is ready after \d+\.\ds: it runs the table services",
        lines[1],
    )
    assert api.answers == [[other, ready]]  # it asked until the worker was there


@pytest.mark.parametrize(
    ("exit_codes", "timeout", "why"),
    [([1], 600, "ended (exit code 1)"), ([], 0, "did not start within 0s")],
)
def test_without_a_worker_the_demo_says_the_services_run_through_spark_submit(
    exit_codes: list[int], timeout: float, why: str
) -> None:
    lines: list[str] = []
    worker = ResidentWorker(lambda: exit_codes, Path("/srv/tms/logs/worker/worker-0.log"))
    api = _Workers([])
    assert not await_worker(api, worker, "default", timeout, 0, lines.append)  # type: ignore[arg-type]
    assert lines[1] == (
        f"  the resident Spark worker {why}; its log: /srv/tms/logs/worker/worker-0.log. "
        "The table services run through spark-submit"
    )


def _signal_once_waiting(number: int, original: Any) -> threading.Thread:
    """Sends `number` to this process once its handler is no longer `original` (the wait
    installed its own): no sleep has to be long enough."""

    def send() -> None:
        deadline = time.monotonic() + 60
        while signal.getsignal(number) is original:
            assert time.monotonic() < deadline, "the wait never installed its handler"
            time.sleep(0.01)
        os.kill(os.getpid(), number)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_keep_running_waits_for_ctrl_c_or_sigterm_and_restores_the_handlers(
    number: signal.Signals,
) -> None:
    """`--keep-running`'s wait, tested directly (a whole demo in a subprocess costs a
    minute of Spark): the signal ends the wait instead of the process."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    lines: list[str] = []
    report = DemoReport("/t", service_url="http://127.0.0.1:8123")
    report.console_url = "http://127.0.0.1:8123/ui"
    sender = _signal_once_waiting(number, before[number])
    keep_running(report, lines.append)
    sender.join(60)
    assert lines == [
        "",
        "tms keeps running at http://127.0.0.1:8123; web console: http://127.0.0.1:8123/ui",
        "Press Ctrl-C (or send SIGTERM) to stop it.",
        f"Received {number.name}",
    ]
    assert {s: signal.getsignal(s) for s in before} == before


def test_the_wait_also_ends_when_asked() -> None:
    stop = threading.Event()
    stop.set()
    assert wait_for_stop(stop) is None


@pytest.mark.spark
def test_demo_runs_end_to_end_and_summarises(tmp_path: Path) -> None:
    base = tmp_path / "demo" / "trips"
    result = CliRunner().invoke(
        app,
        [
            "demo",
            "--rows", "400",
            "--rounds", "1",
            "--master", "local[1]",
            "--base-path", str(base),
            "--data-dir", str(tmp_path / "service"),
        ],
    )  # fmt: skip
    out = result.output
    assert result.exit_code == 0, out + failure(result)

    # Progress: registration with a policy, the resident worker ready before the first
    # commit, the callbacks, the policy's compaction and clean, each run in the worker.
    assert "Registered the table as id 1 with policy" in out
    ready = out.index("the resident Spark worker is ready after ")
    assert out.index("waiting for the resident Spark worker to start") < ready
    assert ready < out.index("deltacommit ")
    console = re.findall(r"web console:\s+(http://127\.0\.0\.1:\d+/ui)", out)
    assert len(console) == 2 and console[0] == console[1]  # at the start and in the summary
    assert "(stops with the demo: --keep-running keeps it up)" in out
    # a progress line, when a beat came while the watcher looked, names the attempt's log
    for line in re.findall(r"compaction #1 attempt 1: .*", out):
        assert re.search(r"\(log: /\S+/logs/(worker/)?1/\d+\.log\)$", line), line
    assert re.search(r"operation 1 compaction: SCHEDULED \(policy: 3 delta commits", out)
    assert re.search(r"operation 2 clean: SCHEDULED \(policy: 3 commits since the last clean", out)
    # every operation names the engine that ran it, while it runs and when it ends
    assert "(spark-submit)" not in out and "run through spark-submit" not in out
    assert "operation 1 compaction: RUNNING, attempt 1 (spark-worker)" in out
    assert re.search(r"operation 1 compaction \d{17}: COMPLETED in [\d.]+s \(spark-worker\)", out)
    assert re.search(r"operation 2 clean \d{17}: COMPLETED in [\d.]+s \(spark-worker\)", out)
    assert out.count("oracle (hudi-rs) after") == 1

    summary = out[out.index("\nSummary\n") :]
    # the demo's defaults: Hudi 1.1's table version, with a metadata table as Hudi's writers
    assert "table version 9, with a metadata table" in summary
    assert "commits:       3 delta commits, each with a callback" in summary
    assert re.search(r"OP\s+ACTION\s+INSTANT\s+STATUS\s+ATTEMPTS\s+ENGINE\s+DURATION", summary)
    ops = re.findall(r"^\s+(\d+)\s+(\w+)\s+(\d{17})\s+(\w+)\s+(\d+)\s+(\S+)\s+([\d.]+)s"
                     r"\s+(\d+)\s+(\d+)$", summary, re.MULTILINE)  # fmt: skip
    assert [(o[0], o[1], o[3], o[4], o[5]) for o in ops] == [
        ("1", "compaction", "COMPLETED", "1", "spark-worker"),
        ("2", "clean", "COMPLETED", "1", "spark-worker"),
    ]
    compaction, clean = ops
    assert int(compaction[7]) > 0 and int(clean[8]) > 0  # files written, files deleted
    before, after = map(int, re.findall(r"data files:\s+(\d+) before .*?, (\d+) after", summary)[0])
    assert after == data_files(str(base)) and after < before
    assert "392 rows, 1 check: reads the same before and after every table service" in summary
    # the services kept the metadata table: its delta commits of the compaction and the clean
    reader = MetadataTableReader.open(Storage(str(base)))
    assert {compaction[2], clean[2]} <= {i.requested_time for i in reader.timeline.completed()}
    assert sum(len(files) for files in reader.all_files().values()) == after

    snapshot = oracle_snapshot(str(base))
    assert snapshot.num_rows == 392  # 400 inserted, 8 deleted by the last commit


@pytest.mark.spark
def test_demo_on_a_local_s3_server(tmp_path: Path) -> None:
    """`tms demo --storage s3`: the table lives in a bucket of a local S3 server, registered
    with its storage options; compaction and clean run and hudi-rs reads the same."""
    result = CliRunner().invoke(
        app,
        [
            "demo", "--storage", "s3",
            "--rows", "400", "--rounds", "1", "--master", "local[1]",
            "--data-dir", str(tmp_path / "service"),
        ],
    )  # fmt: skip
    out = result.output
    assert result.exit_code == 0, out + failure(result)
    assert "Started a local S3 server at http://127.0.0.1:" in out
    summary = out[out.index("\nSummary\n") :]
    assert "table:         s3://tms-demo/trips" in summary
    assert re.search(r"1\s+compaction\s+\d{17}\s+COMPLETED", summary)
    assert re.search(r"2\s+clean\s+\d{17}\s+COMPLETED", summary)
    assert "reads the same before and after every table service" in summary


def failure(result: Result) -> str:
    """The traceback of what ended a CLI run, for the assertion's message."""
    if result.exc_info is None or isinstance(result.exception, SystemExit):
        return ""
    return "".join(traceback.format_exception(*result.exc_info))
