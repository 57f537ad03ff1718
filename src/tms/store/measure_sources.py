"""What a table's measurement reads from the store rather than from storage: its write
rate (the stored commits) and each table service's cost (its attempts' figures), over a
window ending now.

A table's window is its last `window_seconds`, or its time since registration when that is
shorter, so a table registered an hour ago is not rated over a day. Commits count by when
the store recorded them (`received_at`): the first pull of a table records its whole active
timeline at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tms.store.commits import WRITE_ACTIONS
from tms.store.models import Attempt, AttemptOutcome, Commit, Operation, Tbl
from tms.store.transitions import clock

__all__ = ["ATTEMPTS_READ", "ServiceCost", "service_costs", "write_rate"]

ATTEMPTS_READ = 5000
"""Attempts of one table a measurement reads at most (newest first)."""
MIN_WINDOW_SECONDS = 60.0
"""The shortest window a rate is taken over (a table registered a second ago)."""


def _window(
    session: Session, tbl_id: int, window_seconds: float, now: datetime | None
) -> tuple[datetime, float]:
    """The window's start and its length in seconds (a table removed meanwhile: the whole
    window, which holds nothing of it any more)."""
    created = select(Tbl.created_at).where(Tbl.id == tbl_id).scalar_subquery()
    at, registered = session.execute(select(clock(now), created)).one()
    age = window_seconds if registered is None else (at - registered).total_seconds()
    seconds = min(window_seconds, max(age, MIN_WINDOW_SECONDS))
    return at - timedelta(seconds=seconds), seconds


def write_rate(
    session: Session, tbl_id: int, *, window_seconds: float, now: datetime | None = None
) -> dict[str, Any]:
    """The table's writes (commits, delta commits and replacecommits its writers made; not
    the table services' own) recorded within the window, in total and per hour."""
    start, seconds = _window(session, tbl_id, window_seconds, now)
    c = Commit
    row = session.execute(
        select(
            func.count(),
            func.coalesce(func.sum(c.records), 0),
            func.coalesce(func.sum(c.bytes), 0),
            func.coalesce(func.sum(c.files), 0),
            func.coalesce(func.sum(c.log_files), 0),
            func.coalesce(func.sum(c.log_bytes), 0),
        ).where(c.tbl_id == tbl_id, c.received_at >= start, c.action.in_(sorted(WRITE_ACTIONS)))
    ).one()
    commits, records, written, files, log_files, log_bytes = (int(v) for v in row)
    hours = seconds / 3600
    return {
        "window_hours": round(hours, 4),
        "commits": commits,
        "records": records,
        "bytes": written,
        "files": files,
        "log_files": log_files,
        "log_bytes": log_bytes,
        "commits_per_hour": round(commits / hours, 4),
        "records_per_hour": round(records / hours, 4),
        "bytes_per_hour": round(written / hours, 4),
    }


@dataclass
class ServiceCost:
    """One table service's attempts that ended within the window, and what they cost.

    `executor_seconds` takes, per attempt, the first figure there is: `executor_seconds`
    as its job reported it (basis `reported`); else its service's run time
    (`duration_seconds`) times its Spark tasks, one per file group (`file_groups`; basis
    `wall_x_tasks`, an upper bound: tasks share executors); else the attempt's wall time
    from launch to end (basis `wall`: the tasks are unknown). `bases` counts the attempts
    of each basis. `bytes_read` sums a reported `bytes_read`, None while no job of the
    service reports one."""

    attempts: int = 0
    succeeded: int = 0
    failed: int = 0
    wall_seconds: float = 0.0
    executor_seconds: float = 0.0
    bases: dict[str, int] = field(default_factory=dict)
    bytes_written: int = 0
    bytes_read: int | None = None
    files_written: int = 0
    file_groups: int = 0

    def add(self, outcome: AttemptOutcome, wall: float, figures: Mapping[str, Any]) -> None:
        self.attempts += 1
        self.succeeded += outcome is AttemptOutcome.SUCCEEDED
        self.failed += outcome is not AttemptOutcome.SUCCEEDED
        self.wall_seconds += wall
        seconds, basis = executor_seconds(wall, figures)
        self.executor_seconds += seconds
        self.bases[basis] = self.bases.get(basis, 0) + 1
        self.bytes_written += _count(figures.get("bytes_written"))
        self.files_written += _count(figures.get("files_written"))
        self.file_groups += _count(figures.get("file_groups"))
        if _number(figures.get("bytes_read")) is not None:
            self.bytes_read = (self.bytes_read or 0) + _count(figures.get("bytes_read"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "wall_seconds": round(self.wall_seconds, 3),
            "executor_seconds": round(self.executor_seconds, 3),
            "executor_seconds_basis": dict(sorted(self.bases.items())),
            "bytes_written": self.bytes_written,
            "bytes_read": self.bytes_read,
            "files_written": self.files_written,
            "file_groups": self.file_groups,
        }


def _number(value: Any) -> float | None:
    """A figure that is a non-negative number (a job's odd value is no figure)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 else None


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None else 0


def executor_seconds(wall: float, figures: Mapping[str, Any]) -> tuple[float, str]:
    """An attempt's executor-seconds and their basis (see `ServiceCost`)."""
    reported = _number(figures.get("executor_seconds"))
    if reported is not None:
        return reported, "reported"
    duration = _number(figures.get("duration_seconds"))
    tasks = _number(figures.get("file_groups"))
    if duration is not None and tasks:
        return duration * tasks, "wall_x_tasks"
    return wall, "wall"


def service_costs(
    session: Session, tbl_id: int, *, window_seconds: float, now: datetime | None = None
) -> dict[str, dict[str, Any]]:
    """Per table service (action), the cost of its attempts that ended within the window."""
    start, _ = _window(session, tbl_id, window_seconds, now)
    rows = session.execute(
        select(Operation.action, Attempt.outcome, Attempt.started_at, Attempt.finished_at)
        .add_columns(Attempt.figures)
        .join(Operation, Operation.id == Attempt.operation_id)
        .where(Operation.tbl_id == tbl_id, Attempt.finished_at >= start)
        .order_by(Attempt.finished_at.desc())
        .limit(ATTEMPTS_READ)
    ).all()
    costs: dict[str, ServiceCost] = {}
    for action, outcome, started, finished, figures in rows:
        wall = max((finished - started).total_seconds(), 0.0)
        costs.setdefault(action.value, ServiceCost()).add(outcome, wall, figures or {})
    return {action: cost.to_dict() for action, cost in sorted(costs.items())}
