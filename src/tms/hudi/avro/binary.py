"""Avro's binary encoding of a `long`, for framing records by hand (a data block's records read
as one array or one container file)."""

from __future__ import annotations

__all__ = ["encode_long"]


def encode_long(value: int) -> bytes:
    """An Avro `long` of a non-negative `value`: zig-zag, then a base-128 varint."""
    number = value << 1
    out = bytearray()
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)
