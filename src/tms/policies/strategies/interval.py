"""`interval_hours`: time since the policy last created the action, new commits or not.

A partition TTL has work without any new commit: partitions age with the clock, so what
was kept yesterday may have expired today. The action is due once `hours` have passed since
the policy last created it; before its first one, at once (the clock is when the policy
last created it, not the table's registration: a table that sets a TTL gets its first run
at the next check).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Self

from tms.policies.strategy import SINCE, Path, Strategy, parse_number
from tms.store import CountedTable, ServiceAction

__all__ = ["Interval"]


@dataclass(frozen=True)
class Interval(Strategy):
    """Due `hours` after the policy last created the action; at once before a first one."""

    action: ServiceAction
    hours: float

    actions = frozenset({ServiceAction.PARTITION_TTL})

    @classmethod
    def parse(cls, value: Any, action: ServiceAction, path: Path) -> Self:
        hours = parse_number(value, path, what="hours", integer=False, maximum=100_000)
        return cls(action, float(hours))

    def evaluate(self, table: CountedTable, now: datetime) -> str | None:
        if self.hours <= 0:
            return None
        interval = f"(interval {self.hours:g})"
        last = table.last_run_at.get(self.action)
        if last is None:
            return f"no {_NAMES[self.action]} yet {interval}"
        elapsed = now - last
        if elapsed < timedelta(hours=self.hours):
            return None
        return f"{elapsed / timedelta(hours=1):.1f} hours {SINCE[self.action]} {interval}"


_NAMES = {ServiceAction.PARTITION_TTL: "partition TTL"}
"""How reasons name an action before its first run."""
