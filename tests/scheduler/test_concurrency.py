"""Two scheduler instances ticking at once on one database never launch an operation twice."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from tests.scheduler.fakes import CompletingHandle, FakeEngine, scheduler_for, settings_for
from tests.store.helpers import make_op, make_table
from tms.engines import LaunchSpec
from tms.store import OperationStatus, ServiceAction, list_attempts, session_scope


def test_two_instances_run_each_operation_exactly_once(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    with session_scope(factory) as s:
        tables = [make_table(s, f"t{i}") for i in range(10)]
        ops = [
            make_op(s, t, action)
            for t in tables
            for action in (ServiceAction.COMPACTION, ServiceAction.CLEAN)
        ]
    running: set[int] = set()
    violations: list[str] = []
    lock = threading.Lock()

    def job(spec: LaunchSpec) -> Any:
        with lock:
            if spec.operation_id in running:
                violations.append(f"operation {spec.operation_id} launched while running")
            running.add(spec.operation_id)
        handle = CompletingHandle(spec, factory)
        original = handle.poll

        def poll() -> int | None:
            code = original()
            if code is not None:
                with lock:
                    running.discard(spec.operation_id)
            return code

        handle.poll = poll  # type: ignore[method-assign]
        return handle

    engines = [FakeEngine(job), FakeEngine(job)]
    settings = settings_for(tmp_path, max_running_per_instance=3)
    schedulers = [
        scheduler_for(settings, factory, engine, f"i{n}") for n, engine in enumerate(engines)
    ]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def loop(index: int) -> None:
        try:
            start.wait()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                schedulers[index].tick()
                with lock:
                    launched = sum(len(e.launches) for e in engines)
                if launched >= len(ops) and not schedulers[index].running:
                    return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)

    assert errors == [] and violations == []
    launched = [spec.operation_id for e in engines for spec in e.launches]
    assert sorted(launched) == sorted(op.id for op in ops)  # each exactly once
    with session_scope(factory) as s:
        for op in ops:
            (attempt,) = list_attempts(s, op.id)
            assert attempt.figures == {"files_written": 1}
        statuses = {s.get_one(type(op), op.id).status for op in ops}
    assert statuses == {OperationStatus.COMPLETED}
