"""The metadata table's own `hoodie.properties` and folders, as Hudi lays them out for the data
table's version: Hudi 1.x's (timeline layout 2, `timeline/` and `history/`) on versions 8 and
9, Hudi 0.14/0.15's (layout 1, `archived/`) on version 6."""

from __future__ import annotations

from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage

__all__ = ["create_metadata_table", "metadata_table_config"]


def create_metadata_table(md_storage: Storage, data: TableConfig) -> TableConfig:
    """Write an empty metadata table's folders and `hoodie.properties`; its config."""
    md_config = metadata_table_config(data)
    history = ".hoodie/archived" if data.table_version < 8 else ".hoodie/timeline/history"
    for folder in (
        history,
        ".hoodie/.temp",
        ".hoodie/.heartbeat",
        ".hoodie/.aux/.bootstrap/.partitions",
        ".hoodie/.aux/.bootstrap/.fileids",
        ".hoodie/.schema",
    ):
        md_storage.makedirs(folder)
    md_config.save(md_storage)
    return md_config


def metadata_table_config(data: TableConfig) -> TableConfig:
    """The metadata table's `hoodie.properties`, as Hudi lays it out for the table version."""
    if data.table_version < 8:
        return _version_6_metadata_table_config(data)
    version = str(data.table_version)
    return TableConfig(
        {
            "hoodie.table.name": f"{data.table_name}_metadata",
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.table.version": version,
            "hoodie.table.initial.version": version,
            "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
            "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
            "hoodie.archivelog.folder": "history",
            "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
            "hoodie.table.recordkey.fields": "key",
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.base.file.format": "HFILE",
            "hoodie.record.merge.mode": "CUSTOM",
        }
    )


def _version_6_metadata_table_config(data: TableConfig) -> TableConfig:
    """`hoodie.properties` of a Hudi 0.14/0.15 metadata table (timeline layout 1)."""
    return TableConfig(
        {
            "hoodie.table.name": f"{data.table_name}_metadata",
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.table.version": "6",
            "hoodie.archivelog.folder": "archived",
            "hoodie.timeline.layout.version": "1",
            "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
            "hoodie.table.keygenerator.class": (
                "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator"
            ),
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.table.recordkey.fields": "key",
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.base.file.format": "HFILE",
        }
    )
