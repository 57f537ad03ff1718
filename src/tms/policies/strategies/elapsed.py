"""`elapsed_hours`: time since the action last ran, once the table has a new commit.

This is what serves a table that went quiet: its last few commits never reach a count
threshold, but a day later they are compacted all the same. Without a new commit since the
last run there is nothing for the action to do, so it waits. Before a first run the clock
starts at the table's registration.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Self

from tms.policies.strategy import SINCE, Path, Strategy, commits_since, parse_number
from tms.store import CountedTable, ServiceAction

__all__ = ["Elapsed"]


@dataclass(frozen=True)
class Elapsed(Strategy):
    """Due `hours` after the action last ran (or the table was registered), given at
    least one new commit of the kind the action's counter counts."""

    action: ServiceAction
    hours: float

    # Metadata compaction and log compaction keep no clock of their last run.
    actions = frozenset({ServiceAction.COMPACTION, ServiceAction.CLUSTERING, ServiceAction.CLEAN})

    @classmethod
    def parse(cls, value: Any, action: ServiceAction, path: Path) -> Self:
        hours = parse_number(value, path, what="hours", integer=False, maximum=100_000)
        return cls(action, float(hours))

    def evaluate(self, table: CountedTable, now: datetime) -> str | None:
        if self.hours <= 0:
            return None
        new = commits_since(table, self.action)
        if new < 1:
            return None
        last = table.last_run_at.get(self.action)
        start = last if last is not None else table.created_at
        if start is None:
            return None
        elapsed = now - start
        if elapsed < timedelta(hours=self.hours):
            return None
        since = SINCE[self.action] if last is not None else "since the table was registered"
        kind = "delta commit" if self.action is ServiceAction.COMPACTION else "commit"
        kind += "" if new == 1 else "s"
        return (
            f"{elapsed / timedelta(hours=1):.1f} hours {since} (threshold {self.hours:g}), "
            f"{new} new {kind}"
        )
