"""Key field values as the strings Hudi's key generators make of them.

Hudi reads a key field with `HoodieAvroUtils.getNestedFieldValAsString`: the Avro value after
`convertValueForSpecificDataTypes`, then `toString()`. Spark's row writer
(`BuiltinKeyGenerator.convertToLogicalDataType`) agrees for the types handled here:

- strings as they are; integers and booleans as Java prints them (`7`, `-3`, `true`);
- dates as `LocalDate.toString()` (`2024-01-05`, `+10000-01-01`, `-0005-01-01`);
- decimals as `BigDecimal.toString()` of the value at the column's scale (`12.50`, `1E-8`,
  `0E-8`), which Python's `Decimal` prints by the same rule.

Refused: floating point (`Double.toString` prints `1.0E10`), timestamps (a `Long` of micros, or
a `java.sql.Timestamp` in the writing JVM's time zone, depending on the write path and on
`hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled`, none of which the
table records), and everything else.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.errors import UnsupportedTableError

__all__ = [
    "DEFAULT_PARTITION_PATH",
    "EMPTY_PLACEHOLDER",
    "NULL_PLACEHOLDER",
    "check_key_type",
    "chunked",
    "escape_path_name",
    "escaped",
    "key_strings",
    "padded",
]

NULL_PLACEHOLDER = "__null__"
EMPTY_PLACEHOLDER = "__empty__"
DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"

_ESCAPED = frozenset(chr(c) for c in range(0x20)) | frozenset("\"#%'*/:=?\\\x7f{[]^")
"""The characters `PartitionPathEncodeUtils.escapePathName` writes as `%XX`."""


def check_key_type(field: str, kind: pa.DataType) -> None:
    """Refuse a key field whose values we cannot turn into the strings Hudi makes of them."""
    if _is_string(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return
    if pa.types.is_date(kind) or pa.types.is_decimal(kind):
        return
    raise UnsupportedTableError(
        f"key field {field!r} has type {kind}: only string, integer, boolean, date and decimal"
        " key fields are handled"
    )


def key_strings(column: pa.ChunkedArray, field: str) -> pa.ChunkedArray:
    """The field's values as Hudi's key generators print them; nulls stay null."""
    check_key_type(field, column.type)
    if _is_string(column.type):
        return column.cast(pa.string())
    if pa.types.is_date(column.type):
        return _dates(column.cast(pa.date32()))
    if pa.types.is_decimal(column.type):
        return _decimals(column)
    return column.cast(pa.string())


def escape_path_name(value: str) -> str:
    """`PartitionPathEncodeUtils.escapePathName`: unsafe characters as `%XX`, upper-case hex."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def escaped(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Every non-null value URL-encoded as Hudi encodes partition paths."""
    return pa.chunked_array(
        [pa.array([_escape_or_none(v) for v in values.to_pylist()], pa.string())]
    )


def padded(numbers: pa.ChunkedArray | pa.Array, width: int) -> pa.ChunkedArray:
    """Non-negative integers zero-padded to at least `width` digits, as Joda and Java pad."""
    return chunked(pc.utf8_lpad(pc.cast(numbers, pa.string()), width, "0"))


def chunked(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    return values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])


def _dates(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """`LocalDate.toString()`: four-digit years zero-padded, `+` before years past 9999."""
    year = pc.year(column)
    sign = pc.if_else(pc.less(year, 0), "-", pc.if_else(pc.greater(year, 9999), "+", ""))
    ymd = pc.binary_join_element_wise(
        padded(pc.abs(year), 4), padded(pc.month(column), 2), padded(pc.day(column), 2), "-"
    )
    return chunked(pc.binary_join_element_wise(sign, ymd, ""))


def _decimals(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """`BigDecimal.toString()` at the column's scale; Python's `Decimal` follows the same
    scientific-notation rule (exponent shown when the adjusted exponent is below -6)."""
    return pa.chunked_array([pa.array(_strs(column.to_pylist()), pa.string())])


def _strs(values: Iterable[object]) -> list[str | None]:
    return [None if v is None else str(v) for v in values]


def _escape_or_none(value: str | None) -> str | None:
    return None if value is None else escape_path_name(value)


def _is_string(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))
