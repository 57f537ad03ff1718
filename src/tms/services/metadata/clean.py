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

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.reader import metadata_storage
from tms.hudi.metadata.schema import layout_mismatch
from tms.hudi.properties import TableConfig
from tms.hudi.table import HudiTable
from tms.hudi.timeline.timeline import Timeline
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_COMMITS, schedule_clean
from tms.services.execution import ServiceResult

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


class MetadataTable(HudiTable):
    """A data table's metadata table, opened as a table the clean service can plan and run on."""

    @classmethod
    def of(cls, data_table: HudiTable) -> MetadataTable:
        """The metadata table on the data table's storage (its options and timeouts)."""
        storage = metadata_storage(data_table.storage)
        return cls(storage, TableConfig.load(storage))

    def ensure_supported(self, timeline: Timeline | None = None) -> None:
        """What the clean needs of a metadata table: a timeline it reads file slices from."""
        mismatch = layout_mismatch(self.config.table_version, self.config.timeline_layout_version)
        if mismatch:
            raise UnsupportedTableError(
                f"cannot clean the metadata table {self.base_path}: {mismatch}"
            )


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
