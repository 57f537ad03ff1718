"""The metadata table's own clean, run after each metadata compaction as Hudi's metadata
writer does (`HoodieMetadataWriteUtils.createMetadataWriteConfig`: `KEEP_LATEST_COMMITS`,
retaining at least `DEFAULT_METADATA_CLEANER_COMMITS_RETAINED` = 20 commits).

Compaction leaves each compacted file group's older slice (base HFile and log files) behind;
without a clean they pile up with every compaction. The plan and its execution are the data
table clean's (`tms.services.clean.plan`, `tms.services.clean.execute`): the same policy, the same
protections (latest slices, slices a pending compaction reads), the same `HoodieCleanerPlan`
and `HoodieCleanMetadata` on the metadata table's timeline. Only the table checks differ: the
data table checks refuse what the metadata table always is (HFile base files, its own payload
and key generator), so the metadata table is checked by its own rules instead.
"""

from __future__ import annotations

from typing import Any

from tms.hudi.table import HudiTable
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_COMMITS, schedule_clean
from tms.services.execution import ServiceResult
from tms.services.metadata.table import MetadataTable

__all__ = [
    "METADATA_CLEANER_COMMITS_RETAINED",
    "STAGE_PREFIX",
    "MetadataTable",
    "clean_metadata_table",
]

METADATA_CLEANER_COMMITS_RETAINED = 20
"""Hudi's `DEFAULT_METADATA_CLEANER_COMMITS_RETAINED`."""
STAGE_PREFIX = "metadata table "
"""Its stages (`metadata table cleaning`, `metadata table tasks writing`, `metadata table
committing`), apart from the compaction's that runs before it in the same job."""


def clean_metadata_table(
    spark: Any,
    data_table: HudiTable,
    *,
    retained: int = METADATA_CLEANER_COMMITS_RETAINED,
    heartbeat_interval: float = 60.0,
) -> ServiceResult | None:
    """Plan and run the metadata table's clean (or finish a pending one); None when nothing
    is to be deleted."""
    table = MetadataTable.of(data_table)
    instant = schedule_clean(table, policy=KEEP_LATEST_COMMITS, retained=retained)
    if instant is None:
        return None
    return execute_clean(
        spark, table, instant, heartbeat_interval=heartbeat_interval, stage_prefix=STAGE_PREFIX
    )
