"""What an `index` operation builds (RFC-45): the metadata partitions, the columns their stats
cover, and what a table must offer before any of them is built.

`index_spec` refuses up front what a build could not make true: names outside `BUILDABLE`,
`partition_stats` without `column_stats` (partition stats merge the file-level ranges column
stats hold), column or partition stats on a merge-on-read table (the stats of log files are not
computed), table versions before 8 (Hudi 0.x's metadata layout is not written), and
`record_index` on a table whose record keys cannot be computed (virtual keys under a key
generator we do not reproduce). The columns are those of the table's `column_stats` definition
when it has one, else the ones Hudi picks by default, in V2 from table version 9 (as Hudi 1.1
initialises them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.index_defs import (
    IndexVersion,
    column_stats_columns,
    read_index_definitions,
)
from tms.hudi.metadata.partition_stats import ColumnType, column_types
from tms.hudi.metadata.partitions import COLUMN_STATS, FILES, PARTITION_STATS, RECORD_INDEX
from tms.hudi.metadata.schema import FIRST_1X_TABLE_VERSION
from tms.hudi.properties import CREATE_SCHEMA, TableConfig
from tms.hudi.record_keys import key_generation_refusals
from tms.hudi.storage import Storage
from tms.hudi.timeline.timeline import Timeline

__all__ = [
    "BUILDABLE",
    "DataTable",
    "IndexSpec",
    "IndexWrite",
    "index_definitions",
    "index_spec",
    "native_refusals",
    "request_refusals",
]

BUILDABLE: tuple[str, ...] = (FILES, COLUMN_STATS, PARTITION_STATS, RECORD_INDEX)
"""Metadata partitions an index operation builds, in the order it builds them."""
V2_FROM_TABLE_VERSION = 9
"""Hudi 1.1 (table version 9) writes new stats indexes in index version V2."""


class DataTable(Protocol):
    """The data table an index is built on: `tms.hudi.table.HudiTable` is one (the metadata
    layer names it by what it uses, as the table layer is built on this one)."""

    @property
    def storage(self) -> Storage: ...

    @property
    def config(self) -> TableConfig: ...

    @property
    def base_path(self) -> str: ...

    @property
    def name(self) -> str: ...

    def timeline(self) -> Timeline: ...


@dataclass(frozen=True)
class IndexSpec:
    """What one index operation builds."""

    partitions: tuple[str, ...]
    """Metadata partition names, in `BUILDABLE` order."""
    columns: tuple[str, ...] = ()
    """Columns of column_stats / partition_stats."""
    version: IndexVersion = IndexVersion.V1
    types: Mapping[str, ColumnType] = field(default_factory=dict)
    """Each column's value type (V2 only), which partition stats are written in."""


@dataclass(frozen=True)
class IndexWrite:
    """What a build or catch-up wrote (figures for ServiceResult)."""

    file_groups: int
    """Metadata file groups written."""
    files_written: int
    bytes_written: int
    records_written: int
    """Metadata records written."""
    data_file_groups: int
    """Data file groups indexed (tasks of the first stage)."""
    record_keys: int = 0
    """Record-index entries (keys) written."""


def table_schema(table: DataTable, timeline: Timeline) -> dict[str, Any]:
    """The table's Avro schema: the latest commit's, else the one it was created with."""
    text = timeline.latest_schema() or table.config.get(CREATE_SCHEMA)
    parsed: dict[str, Any] = json.loads(text) if text else {}
    return parsed


def request_refusals(table: DataTable, requested: Sequence[str]) -> list[str]:
    """Why no index build, by tms's code or Hudi's, can build `requested` on this table."""
    config = table.config
    reasons: list[str] = []
    unknown = [p for p in requested if p not in BUILDABLE]
    if unknown:
        reasons.append(
            f"metadata partition(s) {', '.join(unknown)} cannot be built by an index operation "
            f"(buildable: {', '.join(BUILDABLE)})"
        )
    if not requested:
        reasons.append("no metadata partition to build was named")
    if len(set(requested)) != len(requested):
        reasons.append("a metadata partition is named twice")
    if FILES in requested and len(requested) > 1:
        reasons.append("files is built alone: the other partitions are built once it is")
    if config.table_version < FIRST_1X_TABLE_VERSION and PARTITION_STATS in requested:
        reasons.append(
            f"table version {config.table_version} has no partition_stats (Hudi "
            f"{FIRST_1X_TABLE_VERSION}+ only)"
        )
    built = set(config.metadata_partitions)
    if PARTITION_STATS in requested and not ({COLUMN_STATS} & (built | set(requested))):
        reasons.append(
            "partition_stats needs column_stats (built, or built by the same operation): "
            "partition stats merge the file-level ranges column stats hold"
        )
    return reasons


def native_refusals(table: DataTable, requested: Sequence[str]) -> list[str]:
    """Why tms's own build declines `requested` on this table, where Hudi's code may not."""
    config = table.config
    reasons: list[str] = []
    if FILES in requested and config.table_version < FIRST_1X_TABLE_VERSION:
        reasons.append(
            f"table version {config.table_version}: its files partition is not built here (log "
            "files sort by version there, so a catch-up would apply older changes last); a "
            "Hudi writer with the metadata table on initialises it"
        )
    stats = [p for p in requested if p in (COLUMN_STATS, PARTITION_STATS)]
    if stats and config.is_merge_on_read:
        reasons.append(
            f"{', '.join(stats)} on a merge-on-read table: the column stats of log files are "
            "not computed"
        )
    if RECORD_INDEX in requested and not config.populate_meta_fields:
        reasons += [f"record_index: {reason}" for reason in key_generation_refusals(config)]
    return reasons


def _refusals(table: DataTable, requested: Sequence[str]) -> list[str]:
    return request_refusals(table, requested) + native_refusals(table, requested)


def index_spec(table: DataTable, timeline: Timeline, partitions: Sequence[str]) -> IndexSpec:
    """What building `partitions` on this table means; `UnsupportedTableError` naming every
    reason it cannot be built."""
    requested = [p.strip() for p in partitions]
    reasons = _refusals(table, requested)
    if reasons:
        raise UnsupportedTableError("cannot build the index: " + "; ".join(reasons))
    ordered = tuple(p for p in BUILDABLE if p in requested)
    if not {COLUMN_STATS, PARTITION_STATS} & set(ordered):
        return IndexSpec(ordered)
    definitions = read_index_definitions(table.storage, table.config)
    schema = table_schema(table, timeline)
    columns, version = column_stats_columns(
        definitions, schema, populate_meta_fields=table.config.populate_meta_fields
    )
    if COLUMN_STATS not in definitions and table.config.table_version >= V2_FROM_TABLE_VERSION:
        version = IndexVersion.V2
    types = column_types(schema, columns) if version is not IndexVersion.V1 else {}
    return IndexSpec(ordered, tuple(columns), version, types)


def index_definitions(spec: IndexSpec, table_version: int) -> dict[str, dict[str, Any]]:
    """The `.hoodie/.index_defs/index.json` entries of the partitions built, as Hudi 1.x writes
    them: `record_index` (not partitioned) and `column_stats` over its columns. Partition stats
    have no entry of their own (they cover the columns of `column_stats`, as in the fixtures).
    None on table version 6, which keeps no index definitions."""
    entries: dict[str, dict[str, Any]] = {}
    if table_version < FIRST_1X_TABLE_VERSION:
        return entries
    if RECORD_INDEX in spec.partitions:
        entries[RECORD_INDEX] = {
            "indexName": RECORD_INDEX,
            "indexType": RECORD_INDEX,
            "indexFunction": "",
            "sourceFields": [],
            "indexOptions": {"isPartitioned": "false"},
            "version": IndexVersion.V1.name,
        }
    if COLUMN_STATS in spec.partitions:
        entries[COLUMN_STATS] = {
            "indexName": COLUMN_STATS,
            "indexType": COLUMN_STATS,
            "indexFunction": COLUMN_STATS,
            "sourceFields": list(spec.columns),
            "indexOptions": {},
            "version": spec.version.name,
        }
    return entries
