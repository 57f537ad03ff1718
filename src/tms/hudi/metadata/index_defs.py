"""The table's index definitions (`hoodie.table.index.defs.path`, Hudi 1.x): which metadata-table
indexes exist, over which source fields, in which index version.

Table versions 8 and 9 keep them in `.hoodie/.index_defs/index.json` (`HoodieIndexMetadata`:
`{"indexDefinitions": {name: {indexName, indexType, indexFunction, sourceFields, indexOptions,
version}}}`). A table service keeps an index true only if it knows how, so an index type outside
`KNOWN_INDEX_TYPES` refuses the table before anything is written.
"""

from __future__ import annotations

import enum
import json
import posixpath
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage

__all__ = [
    "COLUMN_STATS",
    "INDEX_DEFS_PATH_KEY",
    "KNOWN_INDEX_TYPES",
    "IndexDefinition",
    "IndexVersion",
    "index_definitions_path",
    "parse_index_definitions",
    "read_index_definitions",
]

INDEX_DEFS_PATH_KEY = "hoodie.table.index.defs.path"
COLUMN_STATS = "column_stats"
PARTITION_STATS = "partition_stats"
RECORD_INDEX = "record_index"
SECONDARY_INDEX = "secondary_index"
KNOWN_INDEX_TYPES = frozenset({COLUMN_STATS, PARTITION_STATS, RECORD_INDEX, SECONDARY_INDEX})
"""Index types the services keep true (expression indexes and bloom filters are not)."""


class IndexVersion(enum.IntEnum):
    """`HoodieIndexVersion`: V2 (Hudi 1.1) adds the value type to column and partition stats."""

    V1 = 1
    V2 = 2

    @classmethod
    def parse(cls, text: str) -> IndexVersion:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise UnsupportedTableError(
                f"index definitions: unknown index version {text!r}; refusing the table"
            ) from None


@dataclass(frozen=True)
class IndexDefinition:
    """One entry of `indexDefinitions`."""

    name: str
    index_type: str
    function: str
    source_fields: tuple[str, ...]
    options: dict[str, str] = field(default_factory=dict)
    version: IndexVersion = IndexVersion.V1

    @property
    def is_partitioned(self) -> bool:
        """A partitioned record index (Hudi 1.1 `isPartitioned`)."""
        return self.options.get("isPartitioned", "false").lower() == "true"


def _definition(name: str, raw: Any) -> IndexDefinition:
    if not isinstance(raw, dict):
        raise UnsupportedTableError(f"index definitions: entry {name!r} is not an object")
    index_type = str(raw.get("indexType", ""))
    if index_type not in KNOWN_INDEX_TYPES:
        raise UnsupportedTableError(
            f"index definitions: index {name!r} has type {index_type!r}, which the table "
            f"services cannot keep true (known: {', '.join(sorted(KNOWN_INDEX_TYPES))}); "
            "refusing the table"
        )
    fields = raw.get("sourceFields") or []
    options = raw.get("indexOptions") or {}
    return IndexDefinition(
        name=str(raw.get("indexName", name)),
        index_type=index_type,
        function=str(raw.get("indexFunction") or ""),
        source_fields=tuple(str(f) for f in fields),
        options={str(k): str(v) for k, v in options.items()},
        version=IndexVersion.parse(str(raw.get("version") or "V1")),
    )


def parse_index_definitions(text: str | bytes) -> dict[str, IndexDefinition]:
    """The definitions of an `index.json`, by index name; unknown types refuse the table."""
    try:
        document = json.loads(text)
    except ValueError as err:
        raise UnsupportedTableError(f"index definitions are not JSON: {err}") from err
    entries = document.get("indexDefinitions") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise UnsupportedTableError("index definitions: no 'indexDefinitions' object")
    return {name: _definition(name, raw) for name, raw in entries.items()}


def index_definitions_path(config: TableConfig) -> str | None:
    """Where the definitions are, relative to the base path. Hudi 1.0 may have written the
    property as an absolute path of the table's original location: the part from `.hoodie/`
    on is what names the file in this table."""
    value = config.get(INDEX_DEFS_PATH_KEY).strip()
    if not value:
        return None
    if "://" in value or value.startswith("/"):
        marker = value.rfind("/.hoodie/")
        if marker < 0:
            raise UnsupportedTableError(
                f"{INDEX_DEFS_PATH_KEY}={value!r} points outside the table; refusing the table"
            )
        value = value[marker + 1 :]
    normalized = posixpath.normpath(value)
    if normalized.startswith("..") or not normalized.startswith(".hoodie/"):
        raise UnsupportedTableError(
            f"{INDEX_DEFS_PATH_KEY}={value!r} is not under .hoodie/; refusing the table"
        )
    return normalized


def read_index_definitions(storage: Storage, config: TableConfig) -> dict[str, IndexDefinition]:
    """The table's index definitions; empty when it has none (table version 6, or 8/9 tables
    without the property). A property naming a missing file refuses the table."""
    path = index_definitions_path(config)
    if path is None:
        return {}
    if not storage.exists(path):
        raise UnsupportedTableError(f"{INDEX_DEFS_PATH_KEY} names {path}, which does not exist")
    return parse_index_definitions(storage.read_bytes(path))


# ---------------------------------------------------------------------------------------------
# The columns column stats (and partition stats) cover.

MAX_COLUMNS_TO_INDEX = 32
"""`hoodie.metadata.index.column.stats.max.columns.to.index` default."""
_ALWAYS_INDEXED_META = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
"""Hudi's `META_COLS_TO_ALWAYS_INDEX_SCHEMA_MAP`, a TreeMap: in name order."""
_META_FIELDS = frozenset(
    {*_ALWAYS_INDEXED_META, "_hoodie_commit_seqno", "_hoodie_file_name", "_hoodie_operation"}
)
_DECIMAL_MAX_PRECISION = 30
_DECIMAL_MAX_SCALE = 15


def _non_null(schema: Any) -> Any:
    if isinstance(schema, list):
        branches = [branch for branch in schema if branch != "null"]
        return branches[0] if len(branches) == 1 else schema
    return schema


def is_column_type_supported(field_schema: Any) -> bool:
    """Hudi's `isColumnTypeSupported` for Avro records (the default merger's record type):
    records, arrays, maps, enums and unions of several types are not indexed, nor decimals
    that do not fit Decimal(30, 15)."""
    schema = _non_null(field_schema)
    if isinstance(schema, list):
        return False
    if isinstance(schema, dict):
        if schema.get("logicalType") == "decimal":
            precision = int(schema.get("precision", 0))
            scale = int(schema.get("scale", 0))
            if (
                precision + (_DECIMAL_MAX_SCALE - scale) > _DECIMAL_MAX_PRECISION
                or scale > _DECIMAL_MAX_SCALE
            ):
                return False
        return schema.get("type") not in ("record", "array", "map", "enum")
    return schema not in ("record", "array", "map", "enum")


def column_stats_columns(
    definitions: dict[str, IndexDefinition],
    table_schema: dict[str, Any],
    *,
    populate_meta_fields: bool = True,
    explicit_columns: list[str] | None = None,
    max_columns: int = MAX_COLUMNS_TO_INDEX,
) -> tuple[list[str], IndexVersion]:
    """The columns column stats cover, in Hudi's order, and the index version to write.

    With a `column_stats` definition (tables 8/9) its source fields, as listed. Without one
    (table 6, whose writers keep the list in their own config): the three always-indexed meta
    columns, then `explicit_columns` (`hoodie.metadata.index.column.stats.column.list`) or else
    the first `max_columns` supported top-level fields of the table schema, in V1."""
    definition = definitions.get(COLUMN_STATS)
    if definition is not None:
        return list(definition.source_fields), definition.version
    fields = {str(f["name"]): f["type"] for f in table_schema.get("fields", [])}
    if explicit_columns:
        chosen = [
            name
            for name in explicit_columns
            if name not in _ALWAYS_INDEXED_META
            and name in fields
            and is_column_type_supported(fields[name])
        ]
    else:
        chosen = [
            name
            for name, schema in fields.items()
            if name not in _META_FIELDS and is_column_type_supported(schema)
        ][:max_columns]
    meta = list(_ALWAYS_INDEXED_META) if populate_meta_fields else []
    return meta + chosen, IndexVersion.V1
