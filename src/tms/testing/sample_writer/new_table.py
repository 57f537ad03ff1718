"""New tables: the `.hoodie` folder and `hoodie.properties` of an empty Hudi table.

Creating a table writes no instant, only the layout and the properties Hudi's writer lays out
for the table version: version 6 (timeline layout 1, Hudi 0.14/0.15), version 8 (Hudi 1.0) or
version 9 (Hudi 1.1), both with timeline layout 2 in `.hoodie/timeline/`. Hudi, hudi-rs and
our reader all open them. Writing batches to it is `tms.testing.sample_writer.writer`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.properties import (
    ARCHIVELOG_FOLDER,
    BASE_FILE_FORMAT,
    COMMIT_TIME_ORDERING,
    COPY_ON_WRITE,
    CREATE_SCHEMA,
    EVENT_TIME_ORDERING,
    HIVE_STYLE_PARTITIONING,
    INITIAL_VERSION,
    KEY_GENERATOR_CLASS,
    KEY_GENERATOR_TYPE,
    MERGE_ON_READ,
    ORDERING_FIELDS,
    PARTITION_FIELDS,
    PAYLOAD_CLASS,
    POPULATE_META_FIELDS,
    PRECOMBINE_FIELD,
    RECORD_KEY_FIELDS,
    RECORD_MERGE_MODE,
    RECORD_MERGE_STRATEGY_ID,
    TABLE_FORMAT,
    TABLE_NAME,
    TABLE_TYPE,
    TABLE_VERSION,
    TIMELINE_HISTORY_PATH,
    TIMELINE_LAYOUT_VERSION,
    TIMELINE_PATH,
    TIMELINE_TIMEZONE,
    TableConfig,
)
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.testing.sample_writer import keys
from tms.testing.sample_writer.metadata_table import initialize_metadata_table

__all__ = ["TABLE_VERSIONS", "create_table"]

TABLE_VERSIONS = (6, 8, 9)
"""Table versions a new table can have."""

DEFAULT_PAYLOAD_CLASS = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
"""Event-time ordering: the highest ordering value wins, as our merges do."""
OVERWRITE_PAYLOAD_CLASS = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
"""Commit-time ordering (no ordering field): the latest write wins, as our merges do."""
MERGE_STRATEGY_IDS = {
    EVENT_TIME_ORDERING: "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
    COMMIT_TIME_ORDERING: "ce9acb64-bde0-424c-9b91-f6ebba25356d",
}
"""`HoodieRecordMerger`'s strategy ids of the merge modes, recorded by table version 8."""
KEY_GENERATOR_TYPES = keys.KEY_GENERATOR_TYPES


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
    table_version: int = 6,
    key_generator: str | None = None,
    metadata_partitions: Sequence[str] = (),
) -> HudiTable:
    """Create an empty table of `table_version` with `.hoodie` laid out as Hudi does.

    `key_generator` names the key generator class (one of `keys.KEY_GENERATOR_TYPES`); by
    default the one Hudi infers from the fields. The custom key generator's partition fields
    carry their types (`region:SIMPLE`, `ts:TIMESTAMP`) as table version 8+ records them.
    `metadata_partitions` (among `files`, `column_stats`, `record_index`)
    creates the metadata table the writer then keeps in step with every commit."""
    storage = Storage(base_path)
    if storage.exists(".hoodie/hoodie.properties"):
        raise FileExistsError(f"a Hudi table already exists at {base_path}")
    if table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise ValueError(f"table_type must be {COPY_ON_WRITE} or {MERGE_ON_READ}, not {table_type}")
    if table_version not in TABLE_VERSIONS:
        raise ValueError(f"table_version must be one of {TABLE_VERSIONS}, not {table_version}")
    if not record_key_fields:
        raise ValueError("record_key_fields must name at least one field")
    props = {
        TABLE_NAME: table_name,
        TABLE_TYPE: table_type,
        TABLE_VERSION: str(table_version),
        RECORD_KEY_FIELDS: ",".join(record_key_fields),
        PARTITION_FIELDS: ",".join(partition_fields),
        HIVE_STYLE_PARTITIONING: str(hive_style_partitioning).lower(),
        BASE_FILE_FORMAT: "PARQUET",
        ARCHIVELOG_FOLDER: "archived",
        POPULATE_META_FIELDS: "true",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.metadata.partitions": "",
        "hoodie.partition.metafile.use.base.format": "false",
        "hoodie.database.name": "",
        TIMELINE_TIMEZONE: "UTC",
    }
    if key_generator is not None and key_generator not in KEY_GENERATOR_TYPES:
        raise ValueError(f"key_generator must be one of {sorted(KEY_GENERATOR_TYPES)}")
    key_generator = key_generator or keys.key_generator_class(record_key_fields, partition_fields)
    if table_version == 6:
        props |= _version_6(key_generator, ordering_field)
    else:
        props |= _layout_2(table_version, key_generator, ordering_field)
    if schema is not None:
        props[CREATE_SCHEMA] = json.dumps(avro_record_schema(table_name, schema))
    props.update(extra_properties or {})
    config = TableConfig(props)
    if metadata_partitions:
        schema_json = props.get(CREATE_SCHEMA)
        config = initialize_metadata_table(
            storage, config, metadata_partitions, json.loads(schema_json) if schema_json else {}
        )
    timeline = ".hoodie/timeline/history" if table_version >= 8 else ".hoodie/archived"
    for folder in (
        timeline,
        ".hoodie/.temp",
        ".hoodie/.aux/.bootstrap/.partitions",
        ".hoodie/.aux/.bootstrap/.fileids",
        ".hoodie/.schema",
    ):
        storage.makedirs(folder)
    config.save(storage)
    return HudiTable.open(base_path)


def _version_6(key_generator: str, ordering_field: str | None) -> dict[str, str]:
    """Timeline layout 1; key generator by class, ordering by the precombine field."""
    props = {
        TIMELINE_LAYOUT_VERSION: "1",
        "hoodie.table.type.version": "6",
        KEY_GENERATOR_CLASS: key_generator,
        PAYLOAD_CLASS: DEFAULT_PAYLOAD_CLASS,
    }
    if ordering_field:
        props[PRECOMBINE_FIELD] = ordering_field
    return props


def _layout_2(table_version: int, key_generator: str, ordering_field: str | None) -> dict[str, str]:
    """Versions 8 and 9 (Hudi 1.x): timeline layout 2 under `.hoodie/timeline/`, the record
    merge mode, and the key generator by type. Version 8 names the ordering field
    `precombine.field` and keeps the payload class and merge strategy id; version 9 names it
    `ordering.fields` and records the table format instead."""
    mode = EVENT_TIME_ORDERING if ordering_field else COMMIT_TIME_ORDERING
    props = {
        TIMELINE_LAYOUT_VERSION: "2",
        TIMELINE_PATH: "timeline",
        TIMELINE_HISTORY_PATH: "history",
        INITIAL_VERSION: str(table_version),
        KEY_GENERATOR_TYPE: KEY_GENERATOR_TYPES[key_generator],
        RECORD_MERGE_MODE: mode,
    }
    if table_version == 8:
        props[RECORD_MERGE_STRATEGY_ID] = MERGE_STRATEGY_IDS[mode]
        props[PAYLOAD_CLASS] = DEFAULT_PAYLOAD_CLASS if ordering_field else OVERWRITE_PAYLOAD_CLASS
        if ordering_field:
            props[PRECOMBINE_FIELD] = ordering_field
    else:
        props[TABLE_FORMAT] = "native"
        if ordering_field:
            props[ORDERING_FIELDS] = ordering_field
    return props
