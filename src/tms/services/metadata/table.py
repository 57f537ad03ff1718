"""A data table's metadata table, opened as a table the clean service plans and runs on.

The data table's refusals (`services.table_refusals`) refuse what a metadata table always is
(HFile base files, its own payload and key generator); a metadata table answers its own
(`table_refusals.RefusingTable`): a timeline the clean can read file slices from.
"""

from __future__ import annotations

from tms.hudi.metadata.reader import metadata_storage
from tms.hudi.metadata.schema import layout_mismatch
from tms.hudi.properties import TableConfig
from tms.hudi.table import HudiTable

__all__ = ["MetadataTable"]


class MetadataTable(HudiTable):
    """A data table's metadata table (`.hoodie/metadata`)."""

    @classmethod
    def of(cls, data_table: HudiTable) -> MetadataTable:
        """The metadata table on the data table's storage (its options and timeouts)."""
        storage = metadata_storage(data_table.storage)
        return cls(storage, TableConfig.load(storage))

    def refusals(self) -> list[str]:
        """What the clean needs of a metadata table: a timeline it reads file slices from."""
        mismatch = layout_mismatch(self.config.table_version, self.config.timeline_layout_version)
        return [mismatch] if mismatch else []

    def refused_work(self) -> str:
        """The only work the services do on it as a table of its own: its clean."""
        return f"clean the metadata table {self.base_path}"
