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

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

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
    "java_string_hashes",
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


_HASH_CHUNK = 1 << 16
"""Strings hashed per vectorised step (bounds the working arrays to a few MB)."""


def _powers_of_31(count: int) -> np.ndarray:
    """31^0 .. 31^(count-1) modulo 2^32."""
    powers = np.empty(max(count, 1), dtype=np.uint32)
    power = 1
    for i in range(len(powers)):
        powers[i] = power
        power = (power * 31) & 0xFFFFFFFF
    return powers


def _hash_units(units: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Unsigned hashes of strings given as their code units end to end and their lengths:
    the sum of unit × 31^(units after it), in wrapping 32-bit arithmetic."""
    width = int(lengths[0]) if len(lengths) else 0
    if width and (lengths == width).all():  # keys of one length (UUIDs, padded numbers)
        return _hash_rows(units.reshape(-1, width))
    ends = np.cumsum(lengths)
    after = np.repeat(ends, lengths) - 1 - np.arange(len(units))
    terms = units.astype(np.uint32) * _powers_of_31(int(lengths.max(initial=0)))[after]
    hashes = np.zeros(len(lengths), dtype=np.uint32)
    filled = lengths > 0
    if filled.any():
        starts = (ends - lengths)[filled]
        hashes[filled] = np.add.reduceat(terms, starts, dtype=np.uint32)
    return hashes


def _hash_rows(units: np.ndarray) -> np.ndarray:
    """`_hash_units` of strings of one length, a row each: Horner's rule, a column a step."""
    hashes = np.zeros(len(units), dtype=np.uint32)
    for column in units.T:
        hashes *= np.uint32(31)
        hashes += column
    return hashes


def java_string_hashes(values: Sequence[str] | pa.StringArray) -> np.ndarray:
    """`java_string_hash` of many strings at once (int32): the record index routes every key
    of a write by it, and hashing in Python costs a microsecond a character. An Arrow column
    of ASCII strings is hashed from its buffers, with no Python string made."""
    out = np.empty(len(values), dtype=np.int32)
    for at in range(0, len(values), _HASH_CHUNK):
        chunk = values[at : at + _HASH_CHUNK]
        units, lengths = _code_units(chunk)
        out[at : at + len(chunk)] = _hash_units(units, lengths).view(np.int32)
    return out


def _code_units(chunk: Sequence[str] | pa.StringArray) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-16 code units of strings end to end, and each string's count of them."""
    if isinstance(chunk, pa.Array):
        _, offsets_buffer, data_buffer = chunk.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[
            chunk.offset : chunk.offset + len(chunk) + 1
        ]
        data = np.frombuffer(data_buffer or b"", dtype=np.uint8)[offsets[0] : offsets[-1]]
        if data.max(initial=0) < 0x80:  # ASCII: one code unit a byte
            return data, np.diff(offsets).astype(np.int64)
        chunk = chunk.to_pylist()
    joined = "".join(chunk)
    if joined.isascii():  # one code unit a character: its byte
        units = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
        return units, np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk))
    units = np.frombuffer(joined.encode("utf-16-be", "surrogatepass"), dtype=">u2")
    lengths = np.fromiter(
        (len(v.encode("utf-16-be", "surrogatepass")) // 2 for v in chunk),
        dtype=np.int64,
        count=len(chunk),
    )
    return units, lengths
