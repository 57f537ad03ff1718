"""A new table's metadata table, initialised as Hudi's
`HoodieBackedTableMetadataWriter.initializeFromFilesystem` does on an empty table.

Each metadata partition gets its own bootstrap delta commit, operation `BULK_INSERT_PREPPED`,
named from the solo commit time and the partition's offset in Hudi's order (`files` 0,
`column_stats` 1, `record_index` 2): on table versions 8 and 9 `00000000000000000` plus the
offset (Hudi 1.x); on table version 6 `00000000000000` followed by `010` plus the offset
(`createIndexInitTimestamp` of Hudi 0.14/0.15), on a metadata table of timeline layout 1 with
its `archived` folder and no index definitions (version 6 tables have none).

Its file groups (`files` 1, `column_stats` 2, `record_index` 10: Hudi's default counts) each
get an empty log file holding an empty delete block (`initializeFileGroups`, write token
`0-0-0`); `files` also gets a base HFile with the partition list record. The data table then
lists the partitions as built and, from version 8, names its index definitions (`column_stats`
and `record_index`) in `.hoodie/.index_defs`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.data import write_partition_metadata
from tms.hudi.files.log_writer import encode_empty_delete_block
from tms.hudi.files.names import LogFileName
from tms.hudi.metadata.cells import record_cells
from tms.hudi.metadata.index_defs import INDEX_DEFS_PATH_KEY, IndexVersion, column_stats_columns
from tms.hudi.metadata.partitions import COLUMN_STATS, FILES, RECORD_INDEX, MetadataPartition
from tms.hudi.metadata.reader import metadata_storage
from tms.hudi.metadata.records import partition_list_record
from tms.hudi.metadata.schema import writer_schema
from tms.hudi.metadata.table_config import create_metadata_table
from tms.hudi.metadata.writer import hfile_content, record_schema_without_meta_fields
from tms.hudi.properties import METADATA_PARTITIONS_INFLIGHT, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import request, transition

__all__ = ["METADATA_PARTITIONS", "initialize_metadata_table"]

METADATA_PARTITIONS = (FILES, COLUMN_STATS, RECORD_INDEX)
"""Partitions a new table's metadata table can have, in Hudi's initialisation order."""
FILE_GROUP_COUNTS = {FILES: 1, COLUMN_STATS: 2, RECORD_INDEX: 10}
INIT_WRITE_TOKEN = "0-0-0"
OPERATION = "BULK_INSERT_PREPPED"
INDEX_DEFS_PATH = ".hoodie/.index_defs/index.json"
METADATA_PARTITIONS_KEY = "hoodie.table.metadata.partitions"
VERSION_6_SOLO_COMMIT_TIME = "00000000000000"
VERSION_6_INIT_SUFFIX = 10


def bootstrap_instant_time(table_version: int, offset: int) -> str:
    """The bootstrap delta commit of the metadata partition at `offset` of an empty table."""
    if table_version < 8:
        return f"{VERSION_6_SOLO_COMMIT_TIME}{VERSION_6_INIT_SUFFIX + offset:03d}"
    return f"{offset:017d}"


def _bootstrap_partition(
    storage: Storage, config: TableConfig, partition: str, instant_time: str, schema: str
) -> None:
    requested = request(storage, config, instant_time, Action.DELTA_COMMIT)
    inflight = transition(storage, config, requested, State.INFLIGHT)
    write_partition_metadata(storage, partition, instant_time)
    metadata = CommitMetadata(
        operation_type=OPERATION,
        extra_metadata={"schema": record_schema_without_meta_fields(schema)},
    )
    for index in range(FILE_GROUP_COUNTS[partition]):
        file_id = MetadataPartition(partition).file_group_id(index)
        log_name = LogFileName(file_id, instant_time, 1, INIT_WRITE_TOKEN)
        storage.write_bytes(f"{partition}/{log_name}", encode_empty_delete_block(instant_time))
        if partition == FILES:
            path = f"{partition}/{file_id}_{INIT_WRITE_TOKEN}_{instant_time}.hfile"
            content = hfile_content(schema, record_cells([partition_list_record([])], schema))
            storage.write_bytes(path, content)
            stat = WriteStat(
                file_id=file_id,
                path=path,
                prev_commit="null",
                partition_path=partition,
                num_writes=1,
                num_inserts=1,
                total_write_bytes=len(content),
                file_size_in_bytes=len(content),
            )
            metadata.add_write_stat(partition, stat)
    transition(storage, config, inflight, State.COMPLETED, metadata)


def _index_definitions(
    data: TableConfig, partitions: Sequence[str], schema: dict[str, Any]
) -> dict[str, Any]:
    """`index.json`: the record index (not partitioned) and column stats over the columns
    Hudi picks by default (V2 from table version 9)."""
    definitions: dict[str, Any] = {}
    if RECORD_INDEX in partitions:
        definitions[RECORD_INDEX] = {
            "indexName": RECORD_INDEX,
            "indexType": RECORD_INDEX,
            "indexFunction": "",
            "sourceFields": [],
            "indexOptions": {"isPartitioned": "false"},
            "version": "V1",
        }
    if COLUMN_STATS in partitions:
        columns, _ = column_stats_columns(
            {}, schema, populate_meta_fields=data.populate_meta_fields
        )
        version = IndexVersion.V2 if data.table_version >= 9 else IndexVersion.V1
        definitions[COLUMN_STATS] = {
            "indexName": COLUMN_STATS,
            "indexType": COLUMN_STATS,
            "indexFunction": COLUMN_STATS,
            "sourceFields": columns,
            "indexOptions": {},
            "version": version.name,
        }
    return {"indexDefinitions": definitions}


def initialize_metadata_table(
    storage: Storage, data: TableConfig, partitions: Sequence[str], schema: dict[str, Any]
) -> TableConfig:
    """Create the metadata table of the new (empty) table; returns the data table's config
    listing the built partitions (not saved: the caller saves it)."""
    unknown = [p for p in partitions if p not in METADATA_PARTITIONS]
    if unknown or FILES not in partitions:
        raise ValueError(
            f"metadata partitions must include {FILES} and be among {METADATA_PARTITIONS}"
        )
    if COLUMN_STATS in partitions and data.is_merge_on_read:
        raise ValueError(
            "column_stats on a merge-on-read table is not written: the writer does not compute "
            "the column stats of log files"
        )
    if COLUMN_STATS in partitions and not schema:
        raise ValueError("column_stats needs the table schema")
    md_storage = metadata_storage(storage)
    md_config = create_metadata_table(md_storage, data)
    record_schema = writer_schema(data.table_version, None)
    ordered = [p for p in METADATA_PARTITIONS if p in partitions]
    for offset, partition in enumerate(ordered):
        instant_time = bootstrap_instant_time(data.table_version, offset)
        _bootstrap_partition(md_storage, md_config, partition, instant_time, record_schema)
    props = dict(data.props)
    props[METADATA_PARTITIONS_KEY] = ",".join(sorted(ordered))
    props[METADATA_PARTITIONS_INFLIGHT] = ""
    if data.table_version >= 8 and (COLUMN_STATS in ordered or RECORD_INDEX in ordered):
        definitions = _index_definitions(data, ordered, schema)
        storage.write_bytes(INDEX_DEFS_PATH, json.dumps(definitions, indent=2).encode("utf-8"))
        props[INDEX_DEFS_PATH_KEY] = INDEX_DEFS_PATH
    return TableConfig(props)
