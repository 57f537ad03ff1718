"""A fake engine for pure scheduling tests: it records launches and hands out handles the
test controls. The database stays real."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from tms.backoff import Backoff
from tms.config import Settings, load_settings
from tms.engines import EngineRegistry, LaunchError, LaunchSpec
from tms.scheduler import Scheduler
from tms.store import attempt_for_token, complete_operation, session_scope


class FakeHandle:
    """Runs until the test ends it (`finish`) or the scheduler kills it."""

    def __init__(self, spec: LaunchSpec, exit_code: int | None = None) -> None:
        self.spec = spec
        self.code = exit_code
        self.killed = False

    @property
    def pid(self) -> int | None:
        return None

    @property
    def log_path(self) -> Path:
        return self.spec.log_path

    def poll(self) -> int | None:
        return self.code

    def kill(self) -> None:
        self.killed = True
        if self.code is None:
            self.code = -9

    def finish(self, code: int) -> None:
        self.code = code


class FakeEngine:
    """Records every launch; `behaviour` makes the handle (or raises a LaunchError)."""

    def __init__(self, behaviour: Callable[[LaunchSpec], Any] | None = None) -> None:
        self.launches: list[LaunchSpec] = []
        self.handles: dict[int, Any] = {}
        self._behaviour = behaviour or (lambda spec: FakeHandle(spec))
        self._lock = threading.Lock()

    def launch(self, launch: LaunchSpec) -> Any:
        handle = self._behaviour(launch)
        with self._lock:
            self.launches.append(launch)
            self.handles[launch.attempt_id] = handle
        return handle

    def handle(self, attempt_id: int) -> Any:
        return self.handles[attempt_id]


def failing_launch(message: str, *, retryable: bool = True) -> Callable[[LaunchSpec], Any]:
    def behaviour(spec: LaunchSpec) -> Any:
        raise LaunchError(message, retryable=retryable)

    return behaviour


class CompletingHandle(FakeHandle):
    """A job that reports success through the store (as the API would for it) the first
    time it is polled, then exits 0."""

    def __init__(self, spec: LaunchSpec, factory: sessionmaker[Session]) -> None:
        super().__init__(spec)
        self._factory = factory

    def poll(self) -> int | None:
        if self.code is None and not self.killed:
            with session_scope(self._factory) as session:
                attempt = attempt_for_token(session, self.spec.token)
                assert attempt is not None and attempt.id == self.spec.attempt_id
                complete_operation(session, attempt, figures={"files_written": 1})
            self.code = 0
        return self.code


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path,
        "max_running_per_instance": 10,
        "retry_jitter": 0.0,
        "retry_base_seconds": 30.0,
        "cancel_scan_interval_seconds": 0,  # tests that scan turn it on
        "pull_listings_per_minute": 0,  # tests that pull turn it on
        "measure_tables_per_minute": 0,  # tests that measure turn it on
    }
    values.update(overrides)
    return load_settings(config_file=False, environ={}, **values)


def scheduler_for(
    settings: Settings,
    factory: sessionmaker[Session],
    engine: Any,
    instance_id: str = "i1",
    **kwargs: Any,
) -> Scheduler:
    registry = EngineRegistry({"spark": engine})
    kwargs.setdefault("backoff", Backoff.from_settings(settings))
    return Scheduler(settings, factory, registry, instance_id, **kwargs)
