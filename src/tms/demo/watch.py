"""Following the service from the outside, as an operator would: poll the table's
operations over the API and print each change of status once, and while an attempt runs,
each change of its progress (from its job's heartbeats) with its log file."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tms.api_client import ApiClient, Json

__all__ = [
    "TERMINAL",
    "Echo",
    "OperationSummary",
    "Watcher",
    "describe_figures",
    "describe_progress",
]

TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED", "INVALID"})
Echo = Callable[[str], None]


@dataclass
class OperationSummary:
    id: int
    action: str
    instant: str | None
    status: str
    attempts: int
    duration_seconds: float | None
    files_written: int
    files_deleted: int
    error: str | None = None
    engine: str | None = None
    """What ran its last attempt: spark-worker or spark-submit."""


class Watcher:
    """Polls the table's operations and prints each change of status once."""

    def __init__(self, client: ApiClient, echo: Echo, started: float, poll: float) -> None:
        self.client = client
        self.echo = echo
        self.started = started
        self.poll = poll
        self.seen: dict[int, tuple[str, int]] = {}
        self.summaries: dict[int, OperationSummary] = {}
        self.progress_seen: dict[int, tuple[object, ...]] = {}
        """The last progress printed, by operation."""

    def say(self, text: str) -> None:
        self.echo(f"  [{time.monotonic() - self.started:6.1f}s] {text}")

    def wait_idle(self, table_id: int, timeout: float) -> bool:
        """Until every operation of the table has ended; False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            operations = self.client.operations(table_id=table_id, limit=None)
            for operation in sorted(operations, key=lambda o: int(o["id"])):
                self._observe(operation)
            if all(o["status"] in TERMINAL for o in operations):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(self.poll)

    def _observe(self, op: Json) -> None:
        state = (op["status"], int(op["run_times"]))
        previous = self.seen.get(op["id"])
        if previous == state:
            if op["status"] == "RUNNING":
                self._progress(op)
            return
        self.seen[op["id"]] = state
        name = f"operation {op['id']} {op['action']}"
        status, runs = state
        if previous is None:
            events = self.client.operation(op["id"]).get("events") or []
            why = events[0].get("reason") if events else None
            self.say(f"{name}: SCHEDULED ({why or 'submitted'})")
            if status == "SCHEDULED":
                return
        if status == "RUNNING":
            attempts = self.client.attempts(op["id"])
            engine = (attempts[-1].get("engine") if attempts else None) or "spark"
            self.say(f"{name}: RUNNING, attempt {runs} ({engine})")
            self._progress(op, attempts)
        elif status == "SCHEDULED":
            error = (op.get("last_error") or "").strip().splitlines()[:1]
            self.say(f"{name}: attempt {runs} failed ({''.join(error)}); retry scheduled")
        elif status in TERMINAL:
            self._ended(name, op)

    def _progress(self, op: Json, attempts: list[Json] | None = None) -> None:
        """Print the running attempt's progress when it changed since the last print."""
        if attempts is None:
            attempts = self.client.attempts(op["id"])
        attempt = attempts[-1] if attempts else None
        if attempt is None or attempt.get("outcome") != "RUNNING":
            return
        progress = attempt.get("progress") or None
        if not isinstance(progress, dict):
            return
        key = (
            attempt.get("id"),
            progress.get("stage"),
            progress.get("file_groups_done"),
            progress.get("file_groups_planned"),
        )
        if self.progress_seen.get(op["id"]) == key:
            return
        self.progress_seen[op["id"]] = key
        line = describe_progress(op["action"], op["id"], attempt)
        if line is not None:
            self.say(line)

    def _ended(self, name: str, op: Json) -> None:
        attempts = self.client.attempts(op["id"])
        last = attempts[-1] if attempts else {}
        figures = op.get("result") or last.get("figures") or {}
        summary = OperationSummary(
            id=op["id"],
            action=op["action"],
            instant=op.get("instant") or figures.get("instant"),
            status=op["status"],
            attempts=len(attempts),
            duration_seconds=last.get("duration_seconds"),
            files_written=int(figures.get("files_written") or 0),
            files_deleted=int(figures.get("files_deleted") or 0),
            error=op.get("last_error"),
            engine=last.get("engine"),
        )
        self.summaries[op["id"]] = summary
        took = f" in {summary.duration_seconds:.1f}s" if summary.duration_seconds else ""
        if summary.engine:
            took += f" ({summary.engine})"
        if op["status"] != "COMPLETED":
            detail = (op.get("last_error") or "no error recorded").strip().splitlines()[0]
        else:
            detail = describe_figures(op["action"], figures)
        instant = f" {summary.instant}" if summary.instant else ""
        self.say(f"{name}{instant}: {op['status']}{took}: {detail}")


def describe_figures(action: str, figures: Json) -> str:
    """A job's reported figures in a few words."""
    if not figures or figures.get("nothing_to_do"):
        return "nothing to do"
    if action == "clean":
        return f"{figures.get('files_deleted', 0)} files deleted"
    return (
        f"{figures.get('file_groups', 0)} file groups, {figures.get('files_written', 0)} "
        f"files written ({figures.get('records_written', 0):,} records), "
        f"{figures.get('log_files_compacted', 0)} log files compacted"
    )


def describe_progress(action: str, operation_id: int, attempt: Json) -> str | None:
    """A running attempt's progress in one line, with its log file; None without any:
    `compaction #3 attempt 1: compacting, 2/4 file groups  (log: …/3/7.log)`."""
    progress = attempt.get("progress")
    if not isinstance(progress, dict) or not progress.get("stage"):
        return None
    line = f"{action} #{operation_id} attempt {attempt.get('number', '?')}: {progress['stage']}"
    planned = progress.get("file_groups_planned")
    if isinstance(planned, int):
        done = progress.get("file_groups_done")
        shown = done if isinstance(done, int) else "?"
        line += f", {shown}/{planned} file group{'' if planned == 1 else 's'}"
    log_path = attempt.get("log_path")
    if log_path:
        line += f"  (log: {log_path})"
    return line
