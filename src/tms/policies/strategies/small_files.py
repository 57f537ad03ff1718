"""`small_files`: small base files written into one partition since the last clustering.

Clustering pays off where small files pile up in one place, so the figure is the largest
count of any single partition, not the table's total; "small" is below the service's
`small_file_bytes`, decided when the notification is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from tms.policies.strategies.threshold import Threshold
from tms.store import CountedTable, ServiceAction

__all__ = ["SmallFiles"]


@dataclass(frozen=True)
class SmallFiles(Threshold):
    """Due once one partition got `threshold` small base files since the last clustering."""

    actions = frozenset({ServiceAction.CLUSTERING})
    unit = "small base files in one partition"

    def figure(self, table: CountedTable) -> tuple[int, str]:
        counts = table.small_files_since_clustering
        if not counts:
            return 0, "small base files since the last clustering"
        # The fullest partition; ties go to the first by name, so reasons are stable.
        partition, count = min(counts.items(), key=lambda item: (-item[1], item[0]))
        where = f'partition "{partition}"' if partition else "the table (not partitioned)"
        return count, f"small base files in {where} since the last clustering"
