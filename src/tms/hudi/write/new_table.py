"""New tables: the `.hoodie` folder and `hoodie.properties` of an empty Hudi table.

Creating a table writes no instant, only the layout Hudi's writer lays out for table version 6
(timeline layout 1), so Hudi, hudi-rs and our reader all open it. Writing batches to it is
`tms.hudi.write.writer`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.properties import (
    ARCHIVELOG_FOLDER,
    BASE_FILE_FORMAT,
    COPY_ON_WRITE,
    CREATE_SCHEMA,
    HIVE_STYLE_PARTITIONING,
    KEY_GENERATOR_CLASS,
    MERGE_ON_READ,
    PARTITION_FIELDS,
    POPULATE_META_FIELDS,
    PRECOMBINE_FIELD,
    RECORD_KEY_FIELDS,
    TABLE_NAME,
    TABLE_TYPE,
    TABLE_VERSION,
    TIMELINE_LAYOUT_VERSION,
    TableConfig,
)
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.write import keys

__all__ = ["create_table"]

DEFAULT_PAYLOAD_CLASS = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
"""Event-time ordering: the highest ordering value wins, as our merges do."""


def create_table(
    base_path: str,
    table_name: str,
    *,
    table_type: str = MERGE_ON_READ,
    record_key_fields: Sequence[str],
    ordering_field: str | None,
    partition_fields: Sequence[str] = (),
    hive_style_partitioning: bool = False,
    schema: pa.Schema | None = None,
    extra_properties: dict[str, str] | None = None,
) -> HudiTable:
    """Create an empty table (version 6, timeline layout 1) with `.hoodie` laid out as Hudi does."""
    storage = Storage(base_path)
    if storage.exists(".hoodie/hoodie.properties"):
        raise FileExistsError(f"a Hudi table already exists at {base_path}")
    if table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise ValueError(f"table_type must be {COPY_ON_WRITE} or {MERGE_ON_READ}, not {table_type}")
    if not record_key_fields:
        raise ValueError("record_key_fields must name at least one field")
    props = {
        TABLE_NAME: table_name,
        TABLE_TYPE: table_type,
        TABLE_VERSION: "6",
        TIMELINE_LAYOUT_VERSION: "1",
        RECORD_KEY_FIELDS: ",".join(record_key_fields),
        PARTITION_FIELDS: ",".join(partition_fields),
        HIVE_STYLE_PARTITIONING: str(hive_style_partitioning).lower(),
        KEY_GENERATOR_CLASS: keys.key_generator_class(record_key_fields, partition_fields),
        BASE_FILE_FORMAT: "PARQUET",
        ARCHIVELOG_FOLDER: "archived",
        POPULATE_META_FIELDS: "true",
        "hoodie.table.type.version": "6",
        "hoodie.compaction.payload.class": DEFAULT_PAYLOAD_CLASS,
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.metadata.partitions": "",
        "hoodie.partition.metafile.use.base.format": "false",
        "hoodie.database.name": "",
        "hoodie.timeline.timezone": "UTC",
    }
    if ordering_field:
        props[PRECOMBINE_FIELD] = ordering_field
    if schema is not None:
        props[CREATE_SCHEMA] = json.dumps(avro_record_schema(table_name, schema))
    props.update(extra_properties or {})
    for folder in (
        ".hoodie/archived",
        ".hoodie/.temp",
        ".hoodie/.aux/.bootstrap/.partitions",
        ".hoodie/.aux/.bootstrap/.fileids",
        ".hoodie/.schema",
    ):
        storage.makedirs(folder)
    TableConfig(props).save(storage)
    return HudiTable.open(base_path)
