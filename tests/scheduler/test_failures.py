"""Jobs that die before reporting, and launches that fail: every attempt keeps its reason,
retries back off, and the operation fails once out of retries."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.scheduler.fakes import (
    FakeEngine,
    FakeHandle,
    failing_launch,
    scheduler_for,
    settings_for,
)
from tests.store.helpers import make_op, make_table
from tms.engines import LaunchSpec, default_registry
from tms.scheduler import Scheduler
from tms.store import (
    AttemptOutcome,
    OperationStatus,
    get_operation,
    list_attempts,
    reschedule_operation,
    session_scope,
)

S = OperationStatus


def crashing_job(spec: LaunchSpec) -> FakeHandle:
    """A job that printed a traceback and exited 1 without reporting."""
    spec.log_path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"noise {i}" for i in range(100)] + ["Traceback (most recent call last):"]
    spec.log_path.write_text("\n".join([*lines, "RuntimeError: boom"]) + "\n")
    return FakeHandle(spec, exit_code=1)


def test_job_exiting_without_result_fails_and_retries_until_out_of_retries(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    with session_scope(factory) as s:
        op = make_op(s, make_table(s), max_retries=2)
    engine = FakeEngine(crashing_job)
    scheduler = scheduler_for(settings_for(tmp_path), factory, engine)

    scheduler.tick()  # launches attempt 1
    report = scheduler.tick()  # sees it exited
    assert report.exited == [engine.launches[0].attempt_id]

    with session_scope(factory) as s:
        operation = get_operation(s, op.id)
        (attempt,) = list_attempts(s, op.id)
        assert operation.status is S.SCHEDULED
        assert attempt.outcome is AttemptOutcome.FAILED and attempt.exit_code == 1
        assert attempt.error is not None
        assert attempt.error.startswith("job process exited with code 1 without reporting")
        assert "RuntimeError: boom" in attempt.error and "noise 75" in attempt.error
        assert "noise 10\n" not in attempt.error  # only the tail
        assert attempt.finished_at is not None
        # Backoff: base 30 s after the first failure (no jitter in these settings).
        assert operation.next_run_at - attempt.finished_at == timedelta(seconds=30)
        assert operation.last_error == attempt.error

    # Retry 1: make it due now instead of waiting; it fails too, and the delay doubles.
    with session_scope(factory) as s:
        reschedule_operation(s, op.id, at=timedelta(0), reason="test: due now")
    scheduler.tick()
    scheduler.tick()
    with session_scope(factory) as s:
        operation = get_operation(s, op.id)
        second = list_attempts(s, op.id)[1]
        assert operation.status is S.SCHEDULED and second.finished_at is not None
        assert operation.next_run_at - second.finished_at == timedelta(seconds=60)

    # Retry 2 is the last one (max_retries=2): the operation fails.
    with session_scope(factory) as s:
        reschedule_operation(s, op.id, at=timedelta(0), reason="test: due now")
    scheduler.tick()
    scheduler.tick()

    with session_scope(factory) as s:
        operation = get_operation(s, op.id)
        attempts = list_attempts(s, op.id)
        assert operation.status is S.FAILED and operation.finished_at is not None
        assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED] * 3
        assert [a.exit_code for a in attempts] == [1, 1, 1]
        assert all("RuntimeError: boom" in (a.error or "") for a in attempts)
    assert len(engine.launches) == 3
    assert scheduler.running == {}


def test_launch_failure_is_retried(factory: sessionmaker[Session], tmp_path: Path) -> None:
    with session_scope(factory) as s:
        op = make_op(s, make_table(s))
    engine = FakeEngine(failing_launch("spark-submit not found"))
    report = scheduler_for(settings_for(tmp_path), factory, engine).tick()
    assert len(report.launch_failed) == 1 and report.launched == []
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.SCHEDULED
        (attempt,) = list_attempts(s, op.id)
        assert attempt.outcome is AttemptOutcome.FAILED
        assert attempt.error == "launch failed: spark-submit not found"


@pytest.mark.parametrize(
    ("op_kwargs", "message"),
    [
        ({"engine": "flink"}, "unknown execution engine 'flink'"),
        ({"resource": "lots"}, "resource 'lots'"),
        # Rows stored before the allow-list existed (or by an older instance):
        (
            {"extra_params": {"spark.pyspark.driver.python": "/usr/bin/id"}},
            "launch failed: extra_params key spark.pyspark.driver.python is not allowed",
        ),
        (
            {"extra_params": {"spark.jars": "/tmp/x.jar", "spark.executor.cores": "1"}},
            "launch failed: extra_params key spark.jars is not allowed",
        ),
    ],
)
def test_launch_that_cannot_work_fails_at_once(
    factory: sessionmaker[Session], tmp_path: Path, op_kwargs: dict[str, Any], message: str
) -> None:
    """Real spark-submit engine: an unknown engine, a bad resource string or a Spark
    setting off the allow-list is not retried (and no process is started)."""
    with session_scope(factory) as s:
        op = make_op(s, make_table(s), **op_kwargs)
    settings = settings_for(tmp_path)
    report = Scheduler(settings, factory, default_registry(settings), "i1").tick()
    assert report.launched == [] and len(report.launch_failed) == 1
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.FAILED
        (attempt,) = list_attempts(s, op.id)
        assert message in (attempt.error or "")


def test_missing_spark_submit_is_a_retryable_launch_failure(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    empty_home = tmp_path / "no-spark"
    empty_home.mkdir()
    with session_scope(factory) as s:
        op = make_op(s, make_table(s))
    settings = settings_for(tmp_path, spark_home=empty_home)
    Scheduler(settings, factory, default_registry(settings), "i1").tick()
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.SCHEDULED
        (attempt,) = list_attempts(s, op.id)
        assert "spark-submit not found" in (attempt.error or "")
