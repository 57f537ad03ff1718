"""What every engine shares: the launch request, the handle of a launched job, the errors.

The scheduler only ever sees these types, so an engine (spark-submit today; a cluster REST
API or a Hudi-bundle runner later) is one class registered by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tms.executor_choice import AUTO

__all__ = ["Engine", "JobHandle", "LaunchError", "LaunchSpec"]


@dataclass(frozen=True)
class LaunchSpec:
    """One attempt to launch: what the job needs to find the service, and how to size it.

    The token is kept out of `repr` so that logging a spec never leaks it.
    """

    operation_id: int
    attempt_id: int
    action: str
    api_url: str
    token: str = field(repr=False)
    log_path: Path
    queue: str = "default"
    resource: str | None = None
    parallelism: int | None = None
    extra_params: Mapping[str, Any] = field(default_factory=dict)
    executor: str = AUTO
    """Who the operation asked to run its plans (`tms.executor_choice`): Hudi's bundle goes on
    the job's Spark unless `native`."""

    @property
    def app_name(self) -> str:
        return f"tms-{self.action}-op{self.operation_id}-a{self.attempt_id}"


@runtime_checkable
class JobHandle(Protocol):
    """A launched job as the launching instance sees it (a process, or a remote app)."""

    @property
    def pid(self) -> int | None: ...

    @property
    def log_path(self) -> Path: ...

    def poll(self) -> int | None:
        """The exit code once the job ended (negative: killed by that signal), else None."""
        ...

    def kill(self) -> None:
        """Stop the job and everything it started, now; safe to call twice."""
        ...


class Engine(Protocol):
    """Launches attempts; must return quickly (the scheduler tick waits for it)."""

    def launch(self, launch: LaunchSpec) -> JobHandle: ...


class LaunchError(Exception):
    """The job could not be started. `retryable` is False when retrying cannot help (bad
    resource string, unknown engine), True for the environment (spark-submit missing, fork
    failed), which an operator or a later attempt may fix."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable
