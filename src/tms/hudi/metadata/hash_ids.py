"""The hashed ids in the keys of the column-stats, partition-stats and bloom-filter partitions.

Hudi keys those records by ids of the column, the data partition and the file
(`ColumnIndexID`, `PartitionIndexID`, `FileIndexID`), each Base64 of a hash of the name's UTF-8
bytes: XXHash64 (seed `0xdabadaba`, as a Java int widened to long) for columns and partitions,
MD5 for file names; XXHash64's result is written big-endian (HBase's `Bytes.toBytes(long)`).
"""

from __future__ import annotations

import base64
import hashlib
import struct

__all__ = ["column_id", "file_id", "partition_id", "xxhash64"]

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
HASH_SEED = 0xDABADABA - (1 << 32)
"""`HashID.HASH_SEED`: the int 0xdabadaba, negative in Java, sign-extended when hashed."""


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK
    return (_rotl(acc, 31) * _P1) & _MASK


def _merge_round(acc: int, value: int) -> int:
    acc ^= _round(0, value)
    return (acc * _P1 + _P4) & _MASK


def xxhash64(data: bytes, seed: int = HASH_SEED) -> int:
    """XXH64 of `data` as an unsigned 64-bit int (the algorithm lz4-java implements)."""
    seed &= _MASK
    length = len(data)
    pos = 0
    if length >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed
        v4 = (seed - _P1) & _MASK
        while pos + 32 <= length:
            a, b, c, d = struct.unpack_from("<4Q", data, pos)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            pos += 32
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            acc = _merge_round(acc, v)
    else:
        acc = (seed + _P5) & _MASK
    acc = (acc + length) & _MASK
    while pos + 8 <= length:
        (lane,) = struct.unpack_from("<Q", data, pos)
        acc ^= _round(0, lane)
        acc = (_rotl(acc, 27) * _P1 + _P4) & _MASK
        pos += 8
    if pos + 4 <= length:
        (lane,) = struct.unpack_from("<I", data, pos)
        acc ^= (lane * _P1) & _MASK
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


def column_id(column: str) -> str:
    """`ColumnIndexID(column).asBase64EncodedString()`."""
    return _b64(struct.pack(">Q", xxhash64(column.encode("utf-8"))))


def partition_id(partition_identifier: str) -> str:
    """`PartitionIndexID(partition).asBase64EncodedString()` of a partition identifier."""
    return _b64(struct.pack(">Q", xxhash64(partition_identifier.encode("utf-8"))))


def file_id(file_name: str) -> str:
    """`FileIndexID(fileName).asBase64EncodedString()`: MD5 of the file name."""
    return _b64(hashlib.md5(file_name.encode("utf-8"), usedforsecurity=False).digest())
