"""`log_bytes`: bytes of log files written since the last compaction, summed from the
write stats that commit notifications carry (a merge-on-read table's read cost grows with
them, not with the number of commits)."""

from __future__ import annotations

from dataclasses import dataclass

from tms.policies.strategies.threshold import Threshold
from tms.store import CountedTable, ServiceAction

__all__ = ["LogBytes"]


@dataclass(frozen=True)
class LogBytes(Threshold):
    """Due once `threshold` log bytes were written since the last compaction."""

    actions = frozenset({ServiceAction.COMPACTION})
    unit = "log bytes"
    maximum = 1 << 50

    def figure(self, table: CountedTable) -> tuple[int, str]:
        return table.log_bytes_since_compaction, "log bytes written since the last compaction"
