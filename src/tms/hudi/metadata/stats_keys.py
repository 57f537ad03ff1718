"""Keys of the metadata table's `column_stats` and `partition_stats` records.

Hudi (`HashID`, `ColumnIndexID`, `PartitionIndexID`, `FileIndexID`) keys a file's column stats
by base64(XXHash64(column)) + base64(XXHash64(partition)) + base64(MD5(file name)), and a
partition's by the first two. XXHash64 runs with seed `0xdabadaba`, written big-endian; base64
is the standard alphabet with padding. A non-partitioned table's partition is named ".".
"""

from __future__ import annotations

import base64
import hashlib
import struct

__all__ = [
    "NON_PARTITIONED_NAME",
    "column_id",
    "column_stats_key",
    "file_id",
    "partition_id",
    "partition_identifier",
    "partition_stats_key",
    "xxhash64",
]

NON_PARTITIONED_NAME = "."
_HASH_SEED = 0xFFFFFFFFDABADABA
"""Java's `int HASH_SEED = 0xdabadaba` passed where XXHash64 takes a `long`: sign-extended,
which is what the keys of real tables show (a zero-extended seed gives other keys)."""

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK
    return (_rotl(acc, 31) * _P1) & _MASK


def _merge(acc: int, value: int) -> int:
    acc ^= _round(0, value)
    return (acc * _P1 + _P4) & _MASK


def xxhash64(data: bytes, seed: int) -> int:
    """XXHash64 of `data` (keys are short, so plain Python is fast enough)."""
    seed &= _MASK
    length = len(data)
    pos = 0
    if length >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed
        v4 = (seed - _P1) & _MASK
        while pos <= length - 32:
            a, b, c, d = struct.unpack_from("<4Q", data, pos)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            pos += 32
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for lane in (v1, v2, v3, v4):
            acc = _merge(acc, lane)
    else:
        acc = (seed + _P5) & _MASK
    acc = (acc + length) & _MASK
    while pos + 8 <= length:
        (lane,) = struct.unpack_from("<Q", data, pos)
        acc ^= _round(0, lane)
        acc = (_rotl(acc, 27) * _P1 + _P4) & _MASK
        pos += 8
    if pos + 4 <= length:
        (word,) = struct.unpack_from("<I", data, pos)
        acc ^= (word * _P1) & _MASK
        acc = (_rotl(acc, 23) * _P2 + _P3) & _MASK
        pos += 4
    while pos < length:
        acc ^= (data[pos] * _P5) & _MASK
        acc = (_rotl(acc, 11) * _P1) & _MASK
        pos += 1
    acc ^= acc >> 33
    acc = (acc * _P2) & _MASK
    acc ^= acc >> 29
    acc = (acc * _P3) & _MASK
    acc ^= acc >> 32
    return acc


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _id64(name: str) -> str:
    return _b64(xxhash64(name.encode("utf-8"), _HASH_SEED).to_bytes(8, "big"))


def column_id(column: str) -> str:
    """`ColumnIndexID`: Base64 of the XXHash64 of the column name."""
    return _id64(column)


def partition_id(partition_identifier: str) -> str:
    """`PartitionIndexID`: Base64 of the XXHash64 of the partition identifier."""
    return _id64(partition_identifier)


def file_id(file_name: str) -> str:
    """`FileIndexID`: Base64 of the MD5 of the file name."""
    return _b64(hashlib.md5(file_name.encode("utf-8"), usedforsecurity=False).digest())


def partition_identifier(partition_path: str) -> str:
    """The partition's name in keys: "." for the non-partitioned table's empty path."""
    return partition_path or NON_PARTITIONED_NAME


def partition_stats_key(partition_path: str, column: str) -> str:
    """Key of a partition's stats for one column (`getPartitionStatsIndexKey`)."""
    return column_id(column) + partition_id(partition_identifier(partition_path))


def column_stats_key(partition_path: str, file_name: str, column: str) -> str:
    """Key of a file's stats for one column (`getColumnStatsIndexKey`)."""
    return partition_stats_key(partition_path, column) + file_id(file_name)
