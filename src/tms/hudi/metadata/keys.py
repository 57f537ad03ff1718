"""Record keys of the metadata table, built and taken apart as Hudi does.

- `files`: the partition identifier (a data partition path, `.` for a non-partitioned table),
  and `__all_partitions__` for the partition list.
- `column_stats`: column id + partition id + file id; `partition_stats`: column id + partition
  id; `bloom_filters`: partition id + file id (`tms.hudi.metadata.stats_keys`).
- `record_index`: the data record key itself.
- `secondary_index_<name>`: `<secondary key>$<record key>`, each part escaped
  (`SecondaryIndexKeyUtils`): `\\`, `$` and NUL get a `\\` before them, and a null secondary
  key is the single character NUL.
"""

from __future__ import annotations

from tms.hudi.metadata.stats_keys import (
    NON_PARTITIONED_NAME,
    column_id,
    column_stats_key,
    file_id,
    partition_id,
    partition_identifier,
    partition_stats_key,
)

__all__ = [
    "NON_PARTITIONED_NAME",
    "PARTITION_LIST_KEY",
    "bloom_filter_key",
    "column_stats_key",
    "column_stats_prefix",
    "java_string_hash",
    "partition_identifier",
    "partition_path_of",
    "partition_stats_key",
    "secondary_index_key",
    "split_secondary_index_key",
]

PARTITION_LIST_KEY = "__all_partitions__"
"""`HoodieTableMetadata.RECORDKEY_PARTITION_LIST`."""
_ESCAPE = "\\"
_SEPARATOR = "$"
_NULL = "\0"


def partition_path_of(identifier: str) -> str:
    """The data partition path a `files` key names."""
    return "" if identifier == NON_PARTITIONED_NAME else identifier


def column_stats_prefix(column: str, partition_path: str | None = None) -> str:
    """The key prefix of a column's stats (in one partition when given)."""
    prefix = column_id(column)
    if partition_path is not None:
        prefix += partition_id(partition_identifier(partition_path))
    return prefix


def bloom_filter_key(partition_path: str, file_name: str) -> str:
    return partition_id(partition_identifier(partition_path)) + file_id(file_name)


def _escape(value: str | None) -> str:
    if value is None:
        return _NULL
    return "".join(_ESCAPE + c if c in (_ESCAPE, _SEPARATOR, _NULL) else c for c in value)


def _unescape(value: str) -> str | None:
    if value == _NULL:
        return None
    out: list[str] = []
    escaped = False
    for c in value:
        if escaped:
            out.append(c)
            escaped = False
        elif c == _ESCAPE:
            escaped = True
        else:
            out.append(c)
    return "".join(out)


def secondary_index_key(secondary_key: str | None, record_key: str) -> str:
    """`constructSecondaryIndexKey`."""
    return _escape(secondary_key) + _SEPARATOR + _escape(record_key)


def _separator_position(key: str) -> int:
    escaped = False
    for i, c in enumerate(key):
        if c == _ESCAPE and not escaped:
            escaped = True
        elif c == _SEPARATOR and not escaped:
            return i
        else:
            escaped = False
    raise ValueError(f"secondary index key {key!r} has no unescaped '$'")


def split_secondary_index_key(key: str) -> tuple[str | None, str]:
    """(secondary key, record key) of a secondary index key."""
    at = _separator_position(key)
    record_key = _unescape(key[at + 1 :])
    if record_key is None:
        raise ValueError(f"secondary index key {key!r} has a null record key")
    return _unescape(key[:at]), record_key


def escaped_secondary_prefix(key: str) -> str:
    """`getUnescapedSecondaryKeyPrefixFromSecondaryIndexKey`: the escaped secondary key and its
    `$`, what version 2 secondary indexes route by."""
    return key[: _separator_position(key) + 1]


def java_string_hash(value: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units, 32-bit overflow), signed."""
    h = 0
    if value.isascii():  # each character one code unit: its byte (the record index's keys)
        for unit in value.encode("ascii"):
            h = (31 * h + unit) & 0xFFFFFFFF
    else:
        units = value.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h
