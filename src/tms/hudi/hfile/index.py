"""Block index entries: the root form (in the load-on-open section: offset, on-disk size,
vint-prefixed key) and the non-root form of leaf and intermediate index blocks (entry count,
a secondary index of entry offsets, then offset, on-disk size and key per entry)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tms.hudi.errors import HFileError
from tms.hudi.hfile.keyvalue import read_vlong, write_vlong

_ENTRY_HEAD = struct.Struct(">qi")
_SECONDARY_ENTRY_OVERHEAD = _ENTRY_HEAD.size


@dataclass(frozen=True)
class IndexEntry:
    """Points at a block (data, leaf or intermediate index, meta) by offset and on-disk size
    (header included); `key` is the first key of that block, or a meta block's name."""

    offset: int
    on_disk_size: int
    key: bytes


def decode_root(payload: bytes, count: int) -> tuple[list[IndexEntry], int]:
    """`count` root entries; returns them and the position after the last (mid-key data may
    follow in a multi-level data index)."""
    entries: list[IndexEntry] = []
    pos = 0
    try:
        for _ in range(count):
            offset, size = _ENTRY_HEAD.unpack_from(payload, pos)
            key_len, pos = read_vlong(payload, pos + _ENTRY_HEAD.size)
            if key_len < 0 or pos + key_len > len(payload):
                raise HFileError("root index entry's key runs past the block")
            entries.append(IndexEntry(offset, size, payload[pos : pos + key_len]))
            pos += key_len
    except struct.error as err:
        raise HFileError("root index block is shorter than its entry count says") from err
    return entries, pos


def encode_root(entries: list[IndexEntry]) -> bytes:
    out = bytearray()
    for entry in entries:
        out += _ENTRY_HEAD.pack(entry.offset, entry.on_disk_size)
        out += write_vlong(len(entry.key)) + entry.key
    return bytes(out)


def decode_non_root(payload: bytes) -> list[IndexEntry]:
    try:
        (count,) = struct.unpack_from(">i", payload, 0)
        if count < 0 or 4 * (count + 2) > len(payload):
            raise HFileError("non-root index block's entry count does not fit the block")
        secondary = struct.unpack_from(f">{count + 1}i", payload, 4)
        base = 4 * (count + 2)
        entries = []
        for i in range(count):
            start, end = base + secondary[i], base + secondary[i + 1]
            if not start + _SECONDARY_ENTRY_OVERHEAD <= end <= len(payload):
                raise HFileError("non-root index entry runs past the block")
            offset, size = _ENTRY_HEAD.unpack_from(payload, start)
            entries.append(IndexEntry(offset, size, payload[start + _ENTRY_HEAD.size : end]))
    except struct.error as err:
        raise HFileError("non-root index block is truncated") from err
    return entries


def encode_non_root(entries: list[IndexEntry]) -> bytes:
    secondary = [0]
    body = bytearray()
    for entry in entries:
        body += _ENTRY_HEAD.pack(entry.offset, entry.on_disk_size) + entry.key
        secondary.append(len(body))
    return struct.pack(f">i{len(secondary)}i", len(entries), *secondary) + bytes(body)


def non_root_size(entries: list[IndexEntry]) -> int:
    """Encoded size of a non-root block holding `entries` (HBase's `getNonRootSize`)."""
    return 4 * (len(entries) + 2) + sum(12 + len(e.key) for e in entries)


def root_size(entries: list[IndexEntry]) -> int:
    return sum(12 + len(write_vlong(len(e.key))) + len(e.key) for e in entries)
