"""One scheduler tick against real PostgreSQL: what it claims, in which order, how many."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from tests.scheduler.fakes import FakeEngine, scheduler_for, settings_for
from tests.store.helpers import make_op, make_table
from tms import metrics
from tms.scheduler import start_scheduler
from tms.store import (
    AttemptOutcome,
    OperationStatus,
    ServiceAction,
    attempt_for_token,
    complete_operation,
    get_attempt,
    get_operation,
    list_instances,
    session_scope,
)

S = OperationStatus


def test_claims_by_priority_then_age_up_to_the_instance_limit(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    with session_scope(factory) as s:
        old = make_op(s, make_table(s, "old"), run_at=timedelta(seconds=-60))
        new = make_op(s, make_table(s, "new"), run_at=timedelta(seconds=-10))
        urgent = make_op(s, make_table(s, "urgent"), priority=5, run_at=timedelta(seconds=-1))
        later = make_op(s, make_table(s, "later"), run_at=timedelta(hours=1))
    engine = FakeEngine()
    settings = settings_for(tmp_path, max_running_per_instance=2)
    scheduler = scheduler_for(settings, factory, engine)

    report = scheduler.tick()

    assert [spec.operation_id for spec in engine.launches] == [urgent.id, old.id]
    assert len(report.launched) == 2 and len(scheduler.running) == 2
    assert scheduler.tick().launched == []  # full: nothing more
    assert metrics.REGISTRY.get_sample_value("tms_running_operations") == 2
    with session_scope(factory) as s:
        assert get_operation(s, new.id).status is S.SCHEDULED
        assert get_operation(s, later.id).status is S.SCHEDULED
        assert [i.id for i in list_instances(s)] == ["i1"]
        spec = engine.launches[0]
        attempt = get_attempt(s, spec.attempt_id)
        # The job's token works, and the launch is recorded with its log file.
        assert attempt_for_token(s, spec.token) == attempt
        assert attempt.log_path == str(tmp_path / "logs" / str(urgent.id) / f"{attempt.id}.log")
        assert spec.api_url == "http://127.0.0.1:9091"
        assert get_operation(s, urgent.id).lease_owner == "i1"


def test_one_running_operation_per_table(factory: sessionmaker[Session], tmp_path: Path) -> None:
    with session_scope(factory) as s:
        table = make_table(s, "t")
        first = make_op(s, table, run_at=timedelta(seconds=-2))
        second = make_op(s, table, ServiceAction.CLEAN, run_at=timedelta(seconds=-1))
    engine = FakeEngine()
    scheduler = scheduler_for(settings_for(tmp_path), factory, engine)

    scheduler.tick()
    assert [spec.operation_id for spec in engine.launches] == [first.id]
    scheduler.tick()
    assert len(engine.launches) == 1

    # The job reports success (as the API does for it) and exits: the table is free again.
    spec = engine.launches[0]
    with session_scope(factory) as s:
        attempt = attempt_for_token(s, spec.token)
        assert attempt is not None
        complete_operation(s, attempt)
    engine.handle(spec.attempt_id).finish(0)
    report = scheduler.tick()
    assert report.exited == [spec.attempt_id]
    assert [spec.operation_id for spec in engine.launches] == [first.id, second.id]
    with session_scope(factory) as s:
        done = get_attempt(s, spec.attempt_id)
        assert done.outcome is AttemptOutcome.SUCCEEDED and done.exit_code == 0


def test_queue_limits_count_every_instance(factory: sessionmaker[Session], tmp_path: Path) -> None:
    with session_scope(factory) as s:
        etl = [make_op(s, make_table(s, f"e{i}"), queue="etl") for i in range(3)]
        default = [make_op(s, make_table(s, f"d{i}")) for i in range(2)]
    settings = settings_for(tmp_path, queue_limits={"etl": 2})
    one, two = FakeEngine(), FakeEngine()
    first = scheduler_for(settings, factory, one, "i1")
    second = scheduler_for(settings, factory, two, "i2")

    first.tick()
    second.tick()

    launched = [spec.operation_id for spec in one.launches + two.launches]
    assert sorted(launched) == sorted([etl[0].id, etl[1].id] + [op.id for op in default])
    assert [spec.operation_id for spec in two.launches] == []
    assert {spec.queue for spec in one.launches} == {"etl", "default"}


def test_zero_slots_means_api_only(factory: sessionmaker[Session], tmp_path: Path) -> None:
    with session_scope(factory) as s:
        op = make_op(s, make_table(s))
    engine = FakeEngine()
    scheduler_for(settings_for(tmp_path, max_running_per_instance=0), factory, engine).tick()
    assert engine.launches == []
    with session_scope(factory) as s:
        assert get_operation(s, op.id).status is S.SCHEDULED


def test_run_forever_stops_claiming_and_leaves_jobs_running(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    with session_scope(factory) as s:
        first = make_op(s, make_table(s, "a"))
    engine = FakeEngine()
    scheduler = scheduler_for(
        settings_for(tmp_path, scheduler_interval_seconds=0.05), factory, engine
    )
    delays = metrics.REGISTRY.get_sample_value(
        "tms_scheduling_delay_seconds_count", {"action": "compaction"}
    )
    stop = threading.Event()
    thread = start_scheduler(scheduler, stop)
    deadline = time.monotonic() + 10
    while not engine.launches and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert [spec.operation_id for spec in engine.launches] == [first.id]
    assert not engine.handle(engine.launches[0].attempt_id).killed  # left to its lease
    assert (
        metrics.REGISTRY.get_sample_value(
            "tms_scheduling_delay_seconds_count", {"action": "compaction"}
        )
        == (delays or 0) + 1
    )

    with session_scope(factory) as s:  # a stopped scheduler claims nothing more
        second = make_op(s, make_table(s, "b"))
    scheduler.tick()
    assert len(engine.launches) == 1
    with session_scope(factory) as s:
        assert get_operation(s, second.id).status is S.SCHEDULED
        assert get_operation(s, first.id).status is S.RUNNING
