"""`auto`: targets instead of thresholds, decided from the table's latest measurement
(`tms.policies.auto`), e.g. `{"auto": {"max_log_files_per_slice": 6}}` under compaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self

from tms.policies.auto import AUTO_ACTIONS, decide
from tms.policies.auto_targets import Targets, parse_targets
from tms.policies.strategy import Path, Strategy
from tms.store import CountedTable, ServiceAction

__all__ = ["Auto"]


@dataclass(frozen=True)
class Auto(Strategy):
    """Due when the latest measurement misses the action's target."""

    action: ServiceAction
    targets: Targets

    actions = AUTO_ACTIONS

    @classmethod
    def parse(cls, value: Any, action: ServiceAction, path: Path) -> Self:
        return cls(action, parse_targets(value, path))

    def evaluate(self, table: CountedTable, now: datetime) -> str | None:
        return decide(self.action, self.targets, table, now)
