"""`log_files`: log files written since the last compaction, from the notifications' write
stats (each one is a file a reader opens and merges)."""

from __future__ import annotations

from dataclasses import dataclass

from tms.policies.strategies.threshold import Threshold
from tms.store import CountedTable, ServiceAction

__all__ = ["LogFiles"]


@dataclass(frozen=True)
class LogFiles(Threshold):
    """Due once `threshold` log files were written since the last compaction."""

    actions = frozenset({ServiceAction.COMPACTION})
    unit = "log files"

    def figure(self, table: CountedTable) -> tuple[int, str]:
        return table.log_files_since_compaction, "log files written since the last compaction"
