"""The `column_stats` entries of a base file, from its Parquet footer: one per indexed column,
keyed as Hudi keys them, valued as `HoodieMetadataColumnStats`; and the deletion entries of a
removed file.

What Hudi does (`ParquetUtils.readColumnStatsFromMetadata`, `HoodieColumnRangeMetadata`,
`HoodieMetadataPayload.createColumnStatsRecords`): for every row group, each column chunk whose
dot path is an indexed column gives min/max from its statistics, nulls (the chunk's value
count when the statistics are empty), the value count, the compressed and uncompressed sizes;
row groups merge by min of mins, max of maxes and sums. Nested fields match only when the
index lists their leaf path; a listed group (record, array, map) has no chunk of that name and
so no entry. A deleted file gets a stub per column: no min/max, counts and sizes -1,
`isDeleted` true (in V2 with value type NULL). `isTightBound` is false on file entries.

Where this module refuses instead (`UnsupportedTableError`): a column type Hudi cannot write
either (V2: INT96, UUID stored as FIXED, or logical types such as INT(8/16) and JSON, which make
Hudi drop the whole file's stats; V1: FIXED without decimal, INT96).

Not reproducible from a footer, so not done here: the stats of log files (Hudi reads their
records; sizes 0), which only writers of log files produce. A chunk whose values are all null
gets no min/max here; Hudi's `ParquetUtils` takes `genericGetMin()` unguarded, which for
parquet-mr's numeric statistics may be 0 instead of null (no fixture has such a chunk).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.data import read_footer
from tms.hudi.metadata.index_defs import IndexVersion
from tms.hudi.metadata.stats_keys import column_stats_key
from tms.hudi.metadata.stats_values import (
    Value,
    ValueType,
    check_known,
    java_order_key,
    unscaled_bytes_to_decimal,
    unwrap,
    wrap,
)
from tms.hudi.storage import Storage

__all__ = [
    "COLUMN_STATS_RECORD_TYPE",
    "ColumnRange",
    "column_stats_entries",
    "deletion_entries",
    "merge_ranges",
    "range_from_payload",
    "ranges_from_footer",
]

COLUMN_STATS_RECORD_TYPE = 3
"""`HoodieMetadataRecord.type` of a `column_stats` record."""


@dataclass(frozen=True)
class ColumnRange:
    """`HoodieColumnRangeMetadata`: one column's range in one file (or, merged, a partition)."""

    file_name: str
    column_name: str
    min_value: Value | None
    max_value: Value | None
    null_count: int
    value_count: int
    total_size: int
    total_uncompressed_size: int
    value_type: ValueType
    """`ValueType.V1` for index version V1 (no `valueType` written)."""
    precision: int = 0
    scale: int = 0
    """Of decimals (V2 writes them as "precision,scale"; V1 wrappers hold scale 15)."""
    v1_wrapper: str = ""
    """V1 only: the wrapper Hudi picks for the Java type of the value."""

    def payload(self, *, is_deleted: bool = False, is_tight_bound: bool = False) -> dict[str, Any]:
        """The `HoodieMetadataColumnStats` record (wrappers as fastavro's named branches)."""
        value_type_info = None
        if self.value_type is not ValueType.V1:
            info = (
                f"{self.precision},{self.scale}" if self.value_type is ValueType.DECIMAL else None
            )
            value_type_info = {"typeOrdinal": int(self.value_type), "additionalInfo": info}
        return {
            "fileName": self.file_name,
            "columnName": self.column_name,
            "minValue": wrap(self.min_value, self.value_type, self.scale, self.v1_wrapper),
            "maxValue": wrap(self.max_value, self.value_type, self.scale, self.v1_wrapper),
            "valueCount": self.value_count,
            "nullCount": self.null_count,
            "totalSize": self.total_size,
            "totalUncompressedSize": self.total_uncompressed_size,
            "isDeleted": is_deleted,
            "isTightBound": is_tight_bound,
            "valueType": value_type_info,
        }

    def order_key(self, value: Value) -> Any:
        return java_order_key(value, self.value_type, self.v1_wrapper)


def merge_ranges(left: ColumnRange, right: ColumnRange) -> ColumnRange:
    """`HoodieColumnRangeMetadata.merge`: min of mins, max of maxes, counts and sizes summed;
    the left side's file name and type stay."""
    if left.value_type is not right.value_type:
        raise UnsupportedTableError(
            f"column {left.column_name!r}: ranges of types {left.value_type.name} and "
            f"{right.value_type.name} cannot merge"
        )

    def pick(a: Value | None, b: Value | None, smaller: bool) -> Value | None:
        if a is None or b is None:
            return b if a is None else a
        a_key, b_key = left.order_key(a), left.order_key(b)
        if smaller:
            return a if a_key < b_key else b
        return a if a_key > b_key else b

    return replace(
        left,
        min_value=pick(left.min_value, right.min_value, smaller=True),
        max_value=pick(left.max_value, right.max_value, smaller=False),
        null_count=left.null_count + right.null_count,
        value_count=left.value_count + right.value_count,
        total_size=left.total_size + right.total_size,
        total_uncompressed_size=left.total_uncompressed_size + right.total_uncompressed_size,
    )


# ---------------------------------------------------------------------------------------------
# From a Parquet footer.


def _logical(column: Any) -> dict[str, Any]:
    import json

    parsed: dict[str, Any] = json.loads(column.logical_type.to_json())
    return parsed


_TIME_UNITS = {"milliseconds": "MILLIS", "microseconds": "MICROS", "nanoseconds": "NANOS"}


def _v2_type(column: Any) -> ValueType:
    """`ValueType.fromParquetPrimitiveType`: the logical type when there is one."""
    logical = _logical(column)
    kind = str(logical.get("Type", "None"))
    physical = column.physical_type
    where = f"column {column.path!r} ({physical}, {kind})"
    if kind == "None":
        by_physical = {
            "INT64": ValueType.LONG,
            "INT32": ValueType.INT,
            "BOOLEAN": ValueType.BOOLEAN,
            "BYTE_ARRAY": ValueType.BYTES,
            "FLOAT": ValueType.FLOAT,
            "DOUBLE": ValueType.DOUBLE,
            "FIXED_LEN_BYTE_ARRAY": ValueType.FIXED,
        }
        if physical not in by_physical:
            raise UnsupportedTableError(f"{where}: Hudi writes no column stats for it")
        return by_physical[physical]
    if kind == "String":
        return ValueType.STRING
    if kind == "Decimal":
        return ValueType.DECIMAL
    if kind == "Date":
        return ValueType.DATE
    if kind == "Time":
        unit = _TIME_UNITS.get(str(logical.get("timeUnit")))
        if unit in ("MILLIS", "MICROS"):
            return ValueType[f"TIME_{unit}"]
    if kind == "Timestamp":
        unit = _TIME_UNITS.get(str(logical.get("timeUnit")))
        if unit is not None:
            prefix = "TIMESTAMP" if logical.get("isAdjustedToUTC") else "LOCAL_TIMESTAMP"
            return ValueType[f"{prefix}_{unit}"]
    raise UnsupportedTableError(f"{where}: Hudi writes no column stats for this logical type")


def _standardize(raw: Any, value_type: ValueType, scale: int, where: str) -> Value:
    """Hudi's in-memory value of a Parquet statistic (`ValueType.standardize...`)."""
    if value_type is ValueType.STRING:
        return bytes(raw).decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if value_type is ValueType.DECIMAL:
        if isinstance(raw, bytes):
            return unscaled_bytes_to_decimal(raw, scale)
        return Decimal(int(raw)).scaleb(-scale)
    if value_type in (ValueType.BYTES, ValueType.FIXED):
        return bytes(raw)
    if isinstance(raw, bool | int | float):
        return raw
    raise UnsupportedTableError(f"{where}: statistic {raw!r} has no column stats form")


def _v1_value(column: Any, raw: Any, where: str) -> tuple[Value, str]:
    """V1 (`convertToNativeJavaType` without a value type): the Java value and its wrapper."""
    converted = str(column.converted_type)
    physical = column.physical_type
    if converted == "DECIMAL":
        value = _standardize(raw, ValueType.DECIMAL, column.scale, where)
        return value, "DecimalWrapper"
    if converted == "DATE":
        return int(raw), "DateWrapper"
    if converted == "UTF8":
        return _standardize(raw, ValueType.STRING, 0, where), "StringWrapper"
    if physical == "BYTE_ARRAY":
        return bytes(raw), "BytesWrapper"
    by_physical = {
        "BOOLEAN": "BooleanWrapper",
        "INT32": "IntWrapper",
        "INT64": "LongWrapper",
        "FLOAT": "FloatWrapper",
        "DOUBLE": "DoubleWrapper",
    }
    if physical not in by_physical:
        raise UnsupportedTableError(f"{where}: Hudi cannot write V1 column stats for {physical}")
    return raw, by_physical[physical]


def _chunk_range(file_name: str, column: Any, chunk: Any, version: IndexVersion) -> ColumnRange:
    where = f"{file_name}: column {column.path!r}"
    stats = chunk.statistics
    has_values = stats is not None and stats.has_min_max
    empty = stats is None or (not stats.has_min_max and not stats.has_null_count)
    nulls = chunk.num_values if empty else int(stats.null_count)
    precision = scale = 0
    wrapper = ""
    low: Value | None = None
    high: Value | None = None
    if version is IndexVersion.V1:
        value_type = ValueType.V1
        if has_values:
            low, wrapper = _v1_value(column, stats.min_raw, where)
            high, _ = _v1_value(column, stats.max_raw, where)
        elif (
            column.physical_type in ("INT96", "FIXED_LEN_BYTE_ARRAY")
            and str(column.converted_type) != "DECIMAL"
        ):
            raise UnsupportedTableError(f"{where}: Hudi cannot write V1 column stats for it")
    else:
        value_type = _v2_type(column)
        if value_type is ValueType.DECIMAL:
            precision, scale = column.precision, column.scale
        if has_values:
            low = _standardize(stats.min_raw, value_type, scale, where)
            high = _standardize(stats.max_raw, value_type, scale, where)
    if value_type is ValueType.V1 and str(column.converted_type) == "DECIMAL":
        precision, scale = column.precision, column.scale
    return ColumnRange(
        file_name=file_name,
        column_name=column.path,
        min_value=low,
        max_value=high,
        null_count=nulls,
        value_count=chunk.num_values,
        total_size=chunk.total_compressed_size,
        total_uncompressed_size=chunk.total_uncompressed_size,
        value_type=value_type,
        precision=precision,
        scale=scale,
        v1_wrapper=wrapper,
    )


def ranges_from_footer(
    file_name: str, footer: Any, columns: Sequence[str], version: IndexVersion
) -> list[ColumnRange]:
    """The file-level range of each indexed column, from a `pyarrow.parquet.FileMetaData`
    (no data read), in the order of `columns`; columns absent from the file have none."""
    wanted = set(columns)
    merged: dict[str, ColumnRange] = {}
    for index in range(footer.num_row_groups):
        row_group = footer.row_group(index)
        for position in range(row_group.num_columns):
            column = footer.schema.column(position)
            if column.path not in wanted:
                continue
            chunk_range = _chunk_range(file_name, column, row_group.column(position), version)
            previous = merged.get(column.path)
            merged[column.path] = (
                chunk_range if previous is None else merge_ranges(previous, chunk_range)
            )
    return [merged[name] for name in columns if name in merged]


def file_ranges(
    storage: Storage, path: str, columns: Sequence[str], version: IndexVersion
) -> list[ColumnRange]:
    """The column ranges of the base file at `path`, from its footer."""
    footer = read_footer(storage, path)
    return ranges_from_footer(path.rsplit("/", 1)[-1], footer, columns, version)


def column_stats_entries(
    partition_path: str,
    file_name: str,
    footer: Any,
    columns: Sequence[str],
    version: IndexVersion,
) -> list[tuple[str, dict[str, Any]]]:
    """`(key, HoodieMetadataColumnStats)` of a new base file, one per indexed column it has."""
    return [
        (column_stats_key(partition_path, file_name, r.column_name), r.payload())
        for r in ranges_from_footer(file_name, footer, columns, version)
    ]


def deletion_entries(
    partition_path: str, file_name: str, columns: Iterable[str], version: IndexVersion
) -> list[tuple[str, dict[str, Any]]]:
    """The entries that delete a removed file's stats (`HoodieColumnRangeMetadata.stub`)."""
    value_type = ValueType.V1 if version is IndexVersion.V1 else ValueType.NULL
    out = []
    for column in columns:
        stub = ColumnRange(file_name, column, None, None, -1, -1, -1, -1, value_type)
        key = column_stats_key(partition_path, file_name, column)
        out.append((key, stub.payload(is_deleted=True)))
    return out


def range_from_payload(payload: dict[str, Any]) -> ColumnRange:
    """A decoded `HoodieMetadataColumnStats` back as a range (for partition stats over files
    whose stats are only in the metadata table, such as log files)."""
    info = payload.get("valueType")
    value_type = ValueType.V1 if info is None else check_known(int(info["typeOrdinal"]))
    precision = scale = 0
    if value_type is ValueType.DECIMAL:
        precision, scale = (int(part) for part in str(info["additionalInfo"]).split(","))  # type: ignore[index]
    low, wrapper = unwrap(payload.get("minValue"), value_type, scale)
    high, other = unwrap(payload.get("maxValue"), value_type, scale)
    if wrapper == "DecimalWrapper" or other == "DecimalWrapper":
        scale = 15
    return ColumnRange(
        file_name=str(payload.get("fileName") or ""),
        column_name=str(payload.get("columnName") or ""),
        min_value=low,
        max_value=high,
        null_count=int(payload.get("nullCount") or 0),
        value_count=int(payload.get("valueCount") or 0),
        total_size=int(payload.get("totalSize") or 0),
        total_uncompressed_size=int(payload.get("totalUncompressedSize") or 0),
        value_type=value_type,
        precision=precision,
        scale=scale,
        v1_wrapper=(wrapper or other) if value_type is ValueType.V1 else "",
    )
