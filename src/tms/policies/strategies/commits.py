"""`commits`: writes (commits, delta commits, replace commits) since the last clean or
clustering, or since the policy's last archival, whichever action the spec is for."""

from __future__ import annotations

from dataclasses import dataclass

from tms.policies.strategies.threshold import Threshold
from tms.policies.strategy import SINCE, commits_since
from tms.store import CountedTable, ServiceAction

__all__ = ["Commits"]


@dataclass(frozen=True)
class Commits(Threshold):
    """Due after `threshold` writes since the action last ran."""

    actions = frozenset({ServiceAction.CLEAN, ServiceAction.CLUSTERING, ServiceAction.ARCHIVAL})
    unit = "commits"

    def figure(self, table: CountedTable) -> tuple[int, str]:
        return commits_since(table, self.action), f"commits {SINCE[self.action]}"
