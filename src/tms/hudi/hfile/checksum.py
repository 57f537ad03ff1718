"""CRC32C (Castagnoli), the checksum HBase writes per chunk of each block.

`google-crc32c`'s C code computes it (every byte of every HFile block passes through here);
its own pure-Python fallback, and ours below, serve where that extension cannot load."""

from __future__ import annotations

import google_crc32c


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _make_table()


def crc32c(data: bytes) -> int:
    if google_crc32c.implementation == "c":
        return int(google_crc32c.value(bytes(data)))
    return crc32c_python(data)


def crc32c_python(data: bytes) -> int:
    """The table-driven CRC32C, byte by byte."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def chunk_checksums(data: bytes, bytes_per_checksum: int) -> bytes:
    """One big-endian CRC32C per `bytes_per_checksum` chunk of `data`."""
    out = bytearray()
    for start in range(0, max(len(data), 1), bytes_per_checksum):
        out += crc32c(data[start : start + bytes_per_checksum]).to_bytes(4, "big")
    return bytes(out)
