"""HBase KeyValue keys as the metadata table writes them: the record key is the row, with an
empty family and qualifier, the latest timestamp and type Put."""

from __future__ import annotations

import struct

from tms.hudi.errors import HFileError
from tms.hudi.hfile.format import LATEST_TIMESTAMP, TYPE_PUT

LATEST_PUT_TAIL = b"\x00" + struct.pack(">qB", LATEST_TIMESTAMP, TYPE_PUT)
"""What follows the row in every key the metadata table writes (computed once)."""
MAX_ROW_LENGTH = 0x7FFF
"""The longest row a KeyValue key holds (its length is a signed short)."""


def row_too_long(row: bytes) -> HFileError:
    return HFileError(
        f"key of {len(row)} bytes is longer than a KeyValue row may be ({MAX_ROW_LENGTH})"
    )


def encode_key(row: bytes, timestamp: int = LATEST_TIMESTAMP, key_type: int = TYPE_PUT) -> bytes:
    """row length(2) row, family length(1) = 0, no qualifier, timestamp(8), type(1)."""
    if len(row) > MAX_ROW_LENGTH:
        raise row_too_long(row)
    if timestamp == LATEST_TIMESTAMP and key_type == TYPE_PUT:
        return len(row).to_bytes(2, "big") + row + LATEST_PUT_TAIL
    return struct.pack(">H", len(row)) + row + b"\x00" + struct.pack(">qB", timestamp, key_type)


def key_row(key: bytes) -> bytes:
    """The row of a KeyValue key, without decoding the rest."""
    if len(key) < 2:
        raise HFileError(f"KeyValue key of {len(key)} bytes has no row length")
    (row_len,) = struct.unpack_from(">H", key, 0)
    if 2 + row_len > len(key):
        raise HFileError("KeyValue key's row length runs past the key")
    return key[2 : 2 + row_len]


def read_vlong(data: bytes, pos: int) -> tuple[int, int]:
    """Hadoop's `WritableUtils.readVLong` (the MVCC memstore timestamp after each cell)."""
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    size = (-119 - first) if first < -120 else (-111 - first)
    value = int.from_bytes(data[pos + 1 : pos + size], "big")
    if first < -120:
        value = ~value
    return value, pos + size


def write_vlong(value: int) -> bytes:
    """Hadoop's `WritableUtils.writeVLong`."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    length = -112
    if value < 0:
        value = ~value
        length = -120
    size = (value.bit_length() + 7) // 8
    return struct.pack(">b", length - size) + value.to_bytes(size, "big")
