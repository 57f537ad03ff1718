"""The server log has one line per outcome of an operation, with its table, action,
instant, attempt and reason, once the outcome is committed (the application's use cases on
the real store; the scheduler with a fake engine where a job's process is involved)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from tests.scheduler.fakes import FakeEngine, FakeHandle, failing_launch, scheduler_for
from tests.scheduler.fakes import settings_for as scheduler_settings
from tests.store.helpers import claim, make_op, make_table
from tms.application import TableAccess, remove, retry
from tms.application.attempt_end import (
    AttemptEnd,
    Completed,
    Exited,
    Failed,
    PlanInvalid,
    StoppedOnCancel,
    finish_attempt,
)
from tms.application.cancel import cancel_operation
from tms.backoff import Backoff
from tms.engines import LaunchSpec
from tms.hudi.locks import AdvisoryLocks
from tms.store import Attempt, Operation, OperationStatus, complete_operation, session_scope

LOGGER = "tms.outcomes"
NO_DELAY = Backoff(base_seconds=0, jitter=0)
"""A retry due at once, so the test claims it again."""
NO_TABLE = TableAccess(lambda write: None, 5.0, cast(AdvisoryLocks, object()))
"""A removal's cancel request on the table, not written."""


def _lines(caplog: pytest.LogCaptureFixture, operation_id: int) -> list[tuple[int, str]]:
    return [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == LOGGER and r.getMessage().startswith(f"operation {operation_id} ")
    ]


def _running(
    factory: sessionmaker[Session], name: str = "t", **kwargs: Any
) -> tuple[Operation, int]:
    """A RUNNING operation of table db.<name> with its first attempt; (operation, attempt
    id). Nothing else may be due."""
    with session_scope(factory) as s:
        op = make_op(s, make_table(s, name), **kwargs)
    with session_scope(factory) as s:
        (claimed,) = claim(s)
        return op, claimed.attempt.id


def _attempt(session: Session, attempt_id: int) -> Attempt:
    return session.get_one(Attempt, attempt_id)


def _end(session: Session, attempt_id: int, end: AttemptEnd) -> None:
    finish_attempt(session, _attempt(session, attempt_id), end, backoff=NO_DELAY)


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)


def test_completed(factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture) -> None:
    op, attempt_id = _running(factory)
    with session_scope(factory) as s:
        _end(s, attempt_id, Completed())
    assert _lines(caplog, op.id) == [
        (
            logging.INFO,
            f"operation {op.id} completed: table db.t, compaction, instant {op.instant}, "
            "attempt 1; now COMPLETED: the job reported success",
        )
    ]


def test_the_store_alone_logs_nothing(
    factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    """The line is the application's: the store's statement only applies the status."""
    op, attempt_id = _running(factory)
    with session_scope(factory) as s:
        complete_operation(s, _attempt(s, attempt_id))
    assert _lines(caplog, op.id) == []


def test_failed_with_a_retry_then_out_of_retries(
    factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    op, attempt_id = _running(factory, max_retries=1)
    error = "job process exited with code 1 without reporting a result\n--- tail ---\nx"
    with session_scope(factory) as s:
        finish_attempt(s, _attempt(s, attempt_id), Exited(error, 1), backoff=NO_DELAY)
    with session_scope(factory) as s:
        (again,) = claim(s)
    with session_scope(factory) as s:
        failed = Failed("boom", retryable=True)
        finish_attempt(s, _attempt(s, again.attempt.id), failed, backoff=NO_DELAY)
    lines = _lines(caplog, op.id)
    assert [level for level, _ in lines] == [logging.WARNING, logging.WARNING]
    assert lines[0][1] == (
        f"operation {op.id} failed, retry scheduled: table db.t, compaction, instant "
        f"{op.instant}, attempt 1; now SCHEDULED: attempt 1 failed; retry 1 of 1: job process "
        "exited with code 1 without reporting a result"
    )
    assert lines[1][1].startswith(f"operation {op.id} failed: ")
    assert lines[1][1].endswith("attempt 2; now FAILED: failed, out of retries: boom")


def test_cancelled_invalid_removed_failed_and_retried(
    factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    failed, failed_attempt = _running(factory, "w", max_retries=0)
    with session_scope(factory) as s:
        _end(s, failed_attempt, Failed("no such file", retryable=False))
    running, attempt_id = _running(factory)
    with session_scope(factory) as s:
        scheduled = make_op(s, make_table(s, "u"))
        removed = make_op(s, make_table(s, "v"))
    with factory() as s:
        cancel_operation(s, scheduled.id, reason="cancelled by operator")
        _end(s, attempt_id, PlanInvalid("the plan vanished from the timeline"))
        s.commit()
        remove(s, removed.id, reason="removed by RFC-43 remove", table=NO_TABLE)
        retry(s, failed.id, reason="retried by operator")
    assert [m for _, m in _lines(caplog, scheduled.id)] == [
        f"operation {scheduled.id} cancelled: table db.u, compaction, instant "
        f"{scheduled.instant}, attempt -; now CANCELLED: cancelled by operator",
    ]
    assert [m for _, m in _lines(caplog, removed.id)] == [
        f"operation {removed.id} cancelled: table db.v, compaction, instant "
        f"{removed.instant}, attempt -; now CANCELLED: removed by RFC-43 remove",
    ]
    assert _lines(caplog, running.id) == [
        (
            logging.WARNING,
            f"operation {running.id} invalid: table db.t, compaction, instant "
            f"{running.instant}, attempt 1; now INVALID: the plan vanished from the timeline",
        )
    ]
    assert _lines(caplog, failed.id) == [
        (
            logging.WARNING,
            f"operation {failed.id} failed: table db.w, compaction, instant {failed.instant}, "
            "attempt 1; now FAILED: no such file",
        ),
        (
            logging.INFO,
            f"operation {failed.id} retried: table db.w, compaction, instant {failed.instant}, "
            "attempt -; now SCHEDULED: retried by operator",
        ),
    ]


def test_a_cancelled_job_and_a_rolled_back_outcome(
    factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    op, attempt_id = _running(factory)
    with session_scope(factory) as s:
        other = make_op(s, make_table(s, "u"))
    with factory() as s:
        _end(s, attempt_id, Completed())
        s.rollback()  # never happened: not logged
        _end(s, attempt_id, Completed())
        s.close()  # nor this
        cancel_operation(s, other.id)  # the same session, a new transaction
        s.commit()
    assert len(_lines(caplog, other.id)) == 1
    with session_scope(factory) as s:
        cancel_operation(s, op.id)  # running: only a request, not an outcome
    assert _lines(caplog, op.id) == []
    with session_scope(factory) as s:
        _end(s, attempt_id, StoppedOnCancel(error="rolled back the plan"))
    assert [m for _, m in _lines(caplog, op.id)] == [
        f"operation {op.id} cancelled: table db.t, compaction, instant {op.instant}, "
        "attempt 1; now CANCELLED: cancelled by request: rolled back the plan"
    ]


def _exits_with_1(spec: LaunchSpec) -> FakeHandle:
    return FakeHandle(spec, exit_code=1)


@pytest.mark.parametrize(
    ("behaviour", "label", "reason"),
    [
        (
            failing_launch("spark-submit not found"),
            "failed, retry scheduled",
            "launch failed: spark-submit not found",
        ),
        (
            failing_launch("extra_params key spark.jars is not allowed", retryable=False),
            "failed",
            "now FAILED: launch failed: extra_params key spark.jars is not allowed",
        ),
        (_exits_with_1, "failed, retry scheduled", "job process exited with code 1"),
    ],
)
def test_the_scheduler_logs_each_outcome_of_its_jobs_once(
    factory: sessionmaker[Session],
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    behaviour: Callable[[LaunchSpec], Any],
    label: str,
    reason: str,
) -> None:
    caplog.set_level(logging.INFO)
    with session_scope(factory) as s:
        op = make_op(s, make_table(s))
    scheduler = scheduler_for(scheduler_settings(tmp_path), factory, FakeEngine(behaviour))
    scheduler.tick()
    scheduler.tick()  # sees the process that exited
    (line,) = _lines(caplog, op.id)
    assert line[0] == logging.WARNING
    assert line[1].startswith(f"operation {op.id} {label}: table db.t, compaction")
    assert "attempt 1; now " in line[1] and reason in line[1]
    # Nothing else reports the same outcome at WARNING or above.
    others = [
        r.getMessage()
        for r in caplog.records
        if r.name != LOGGER and r.levelno >= logging.WARNING and str(op.id) in r.getMessage()
    ]
    assert others == []


def test_a_lost_attempt(
    factory: sessionmaker[Session], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    op, _ = _running(factory)
    with session_scope(factory) as s:
        s.execute(
            update(Operation)
            .where(Operation.id == op.id)
            .values(lease_expires_at=Operation.lease_expires_at - timedelta(hours=1))
        )
    scheduler_for(scheduler_settings(tmp_path), factory, FakeEngine()).tick()
    (line,) = _lines(caplog, op.id)
    assert line[0] == logging.WARNING
    assert line[1].startswith(
        f"operation {op.id} lost, retry scheduled: table db.t, compaction, instant "
        f"{op.instant}, attempt 1; now {OperationStatus.SCHEDULED.value}: lease expired at "
    )
