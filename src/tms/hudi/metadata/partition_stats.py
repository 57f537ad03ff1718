"""The `partition_stats` entries of a data partition: its column ranges recomputed from the
file-level ranges of the files Hudi counts in it.

What Hudi does (`HoodieMetadataWriteUtils.convertMetadataToPartitionStatRecords`,
`FileFormatUtils.getColumnRangeInPartition`, `HoodieMetadataPayload.createPartitionStatsRecords`):
for every partition a commit writes to, the files are those of the partition's latest merged
file slices as of the commit, base files and log files alike, with the commit's own files in
place of what they supersede; the ranges of its new files come from their footers (or, for
log files, from their records), the others from the `column_stats` partition. Per column the
ranges merge (min of mins, max of maxes, counts and sizes summed) into one record whose
`fileName` is the partition path, with `isTightBound` true. In V2 each file's min/max is first
brought to the type the table schema gives the column (`ValueMetadata` of the Avro field), and
that is the `valueType` written.

One quirk is kept on purpose: Hudi means to leave out the file groups a replacecommit replaces,
but compares file names with file ids, so a clustering's partition stats still count the
replaced file groups (`files_counted`); the next commit to the partition corrects them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from functools import reduce
from typing import Any

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.metadata.column_stats import ColumnRange, merge_ranges
from tms.hudi.metadata.index_defs import IndexVersion
from tms.hudi.metadata.stats_keys import partition_stats_key
from tms.hudi.metadata.stats_values import Value, ValueType

__all__ = [
    "PARTITION_STATS_RECORD_TYPE",
    "ColumnType",
    "column_types",
    "files_counted",
    "partition_deletion_entries",
    "partition_stats_entries",
]

PARTITION_STATS_RECORD_TYPE = 6
"""`HoodieMetadataRecord.type` of a `partition_stats` record."""

ColumnType = tuple[ValueType, int, int]
"""A column's value type with its decimal precision and scale (0, 0 otherwise)."""

_LOGICAL = {
    "date": ValueType.DATE,
    "time-millis": ValueType.TIME_MILLIS,
    "time-micros": ValueType.TIME_MICROS,
    "timestamp-millis": ValueType.TIMESTAMP_MILLIS,
    "timestamp-micros": ValueType.TIMESTAMP_MICROS,
    "timestamp-nanos": ValueType.TIMESTAMP_NANOS,
    "local-timestamp-millis": ValueType.LOCAL_TIMESTAMP_MILLIS,
    "local-timestamp-micros": ValueType.LOCAL_TIMESTAMP_MICROS,
    "local-timestamp-nanos": ValueType.LOCAL_TIMESTAMP_NANOS,
    "uuid": ValueType.UUID,
}
_PRIMITIVE = {
    "null": ValueType.NULL,
    "boolean": ValueType.BOOLEAN,
    "int": ValueType.INT,
    "long": ValueType.LONG,
    "float": ValueType.FLOAT,
    "double": ValueType.DOUBLE,
    "bytes": ValueType.BYTES,
    "string": ValueType.STRING,
    "fixed": ValueType.FIXED,
}
_META_STRINGS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")


def _avro_type(schema: Any, where: str) -> ColumnType:
    """`ValueType.fromSchema` of an Avro field schema (nullable unions resolved)."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise UnsupportedTableError(f"{where}: a union of several types has no stats type")
        schema = branches[0]
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return _PRIMITIVE[schema], 0, 0
        raise UnsupportedTableError(f"{where}: type {schema!r} has no stats type")
    logical = schema.get("logicalType")
    if logical == "decimal":
        return ValueType.DECIMAL, int(schema["precision"]), int(schema.get("scale", 0))
    if logical in _LOGICAL:
        return _LOGICAL[logical], 0, 0
    return _avro_type(schema.get("type"), where)


def _field(schema: Mapping[str, Any], path: str) -> Any:
    node: Any = schema
    for part in path.split("."):
        if isinstance(node, list):
            node = next(b for b in node if b != "null")
        fields = {f["name"]: f["type"] for f in node.get("fields", [])}
        if part not in fields:
            return None
        node = fields[part]
    return node


def column_types(table_schema: Mapping[str, Any], columns: Iterable[str]) -> dict[str, ColumnType]:
    """The V2 value type of each indexed column from the table's Avro schema (the three meta
    columns are strings even where the schema leaves them out)."""
    out: dict[str, ColumnType] = {}
    for column in columns:
        schema = _field(table_schema, column)
        if schema is None and column in _META_STRINGS:
            schema = "string"
        if schema is not None:
            out[column] = _avro_type(schema, f"column {column!r}")
    return out


_NUMERIC_RANK = {
    ValueType.INT: 0,
    ValueType.LONG: 1,
    ValueType.FLOAT: 2,
    ValueType.DOUBLE: 3,
}


def _promote(value: Value | None, source: ColumnRange, target: ColumnType) -> Value | None:
    """`standardizeJavaTypeAndPromote`: a file's value in the column's table type."""
    kind, _, scale = target
    if value is None or source.value_type is kind:
        return value
    where = f"column {source.column_name!r} of {source.file_name}"
    if kind in _NUMERIC_RANK and source.value_type in _NUMERIC_RANK:
        if _NUMERIC_RANK[source.value_type] > _NUMERIC_RANK[kind]:
            raise UnsupportedTableError(f"{where}: {source.value_type.name} cannot be {kind.name}")
        return float(value) if kind in (ValueType.FLOAT, ValueType.DOUBLE) else value
    if kind is ValueType.DECIMAL and isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value).scaleb(-scale)
    if {kind, source.value_type} <= {ValueType.BYTES, ValueType.FIXED}:
        return value
    raise UnsupportedTableError(
        f"{where}: stats of type {source.value_type.name} cannot be merged as {kind.name}"
    )


def _as_partition_range(
    partition_path: str, item: ColumnRange, types: Mapping[str, ColumnType]
) -> ColumnRange:
    base = replace(item, file_name=partition_path)
    target = types.get(item.column_name)
    if item.value_type is ValueType.V1 or target is None:
        return base
    kind, precision, scale = target
    return replace(
        base,
        min_value=_promote(item.min_value, item, target),
        max_value=_promote(item.max_value, item, target),
        value_type=kind,
        precision=precision if kind is ValueType.DECIMAL else item.precision,
        scale=scale if kind is ValueType.DECIMAL and item.value_type is not kind else item.scale,
    )


def partition_stats_entries(
    partition_path: str,
    file_ranges: Iterable[ColumnRange],
    types: Mapping[str, ColumnType],
    columns: Sequence[str] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """`(key, HoodieMetadataColumnStats)` of a partition from the file-level ranges of the
    files Hudi counts in it (see `files_counted`), one per column that has ranges, in the order
    of `columns` (else first seen). `types` is `column_types(...)` for V2 and ignored for V1."""
    grouped: dict[str, list[ColumnRange]] = {}
    for item in file_ranges:
        grouped.setdefault(item.column_name, []).append(
            _as_partition_range(partition_path, item, types)
        )
    order = [c for c in columns if c in grouped] if columns is not None else list(grouped)
    out = []
    for column in order:
        merged = reduce(merge_ranges, grouped[column])
        key = partition_stats_key(partition_path, column)
        out.append((key, merged.payload(is_tight_bound=True)))
    return out


def partition_deletion_entries(
    partition_path: str, columns: Iterable[str], version: IndexVersion
) -> list[tuple[str, dict[str, Any]]]:
    """The entries that delete a dropped partition's stats (Hudi's DELETE_PARTITION)."""
    value_type = ValueType.V1 if version is IndexVersion.V1 else ValueType.NULL
    out = []
    for column in columns:
        stub = ColumnRange("", column, None, None, -1, -1, -1, -1, value_type)
        key = partition_stats_key(partition_path, column)
        out.append((key, stub.payload(is_deleted=True, is_tight_bound=True)))
    return out


def files_counted(
    slices_before: Iterable[FileSlice],
    slices_after: Iterable[FileSlice],
    replaced_file_ids: Iterable[str] = (),
) -> list[str]:
    """Names of the files whose ranges a commit's partition stats merge: the partition's latest
    merged slices with the commit (`slices_after`), plus, for a replacecommit, the latest
    slices before it of the file groups it replaced (`slices_before`), as Hudi counts them."""
    replaced = set(replaced_file_ids)
    chosen = list(slices_after) + [s for s in slices_before if s.file_id in replaced]
    names: list[str] = []
    for piece in chosen:
        if piece.base_file is not None:
            names.append(piece.base_file.file_name)
        names += [log.file_name for log in piece.log_files]
    return names
