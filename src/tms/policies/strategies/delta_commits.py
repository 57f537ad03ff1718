"""`delta_commits`: delta commits since the last compaction.

For logcompaction it counts delta commits since the last log compaction or compaction
(either leaves the slices' log blocks merged). For metadata-compaction it counts the metadata
table's delta commits (every data table commit makes one), as Hudi's
`hoodie.metadata.compact.max.delta.commits` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from tms.policies.strategies.threshold import Threshold
from tms.policies.strategy import SINCE, commits_since
from tms.store import CountedTable, ServiceAction

__all__ = ["DeltaCommits"]


@dataclass(frozen=True)
class DeltaCommits(Threshold):
    """Due after `threshold` delta commits since the action last ran."""

    actions = frozenset(
        {
            ServiceAction.COMPACTION,
            ServiceAction.LOG_COMPACTION,
            ServiceAction.METADATA_COMPACTION,
        }
    )
    unit = "delta commits"

    def figure(self, table: CountedTable) -> tuple[int, str]:
        what = "delta commits"
        if self.action is ServiceAction.METADATA_COMPACTION:
            what = "metadata table delta commits"
        return commits_since(table, self.action), f"{what} {SINCE[self.action]}"
