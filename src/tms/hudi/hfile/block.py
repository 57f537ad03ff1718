"""Blocks: the 33-byte header, the (optionally gzip-compressed) payload and the CRC32C
checksums per 16 KB chunk of header plus on-disk data, as HBase writes and verifies them."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from tms.hudi.errors import HFileError
from tms.hudi.hfile.checksum import chunk_checksums
from tms.hudi.hfile.format import (
    BYTES_PER_CHECKSUM,
    CHECKSUM_CRC32C,
    CHECKSUM_SIZE,
    HEADER_SIZE,
    Compression,
)

_HEADER = struct.Struct(">8siiqBii")
_GZIP_OS_BYTE = 9


@dataclass(frozen=True)
class BlockHeader:
    """A block's header fields, named as in Hudi's `HFileBlock`."""

    magic: bytes
    on_disk_size_without_header: int
    uncompressed_size_without_header: int
    prev_block_offset: int
    checksum_type: int
    bytes_per_checksum: int
    on_disk_data_size_with_header: int

    @property
    def on_disk_size(self) -> int:
        """Bytes from this block's start to the next block's."""
        return HEADER_SIZE + self.on_disk_size_without_header


@dataclass(frozen=True)
class Block:
    offset: int
    header: BlockHeader
    payload: bytes
    """The uncompressed bytes after the header, checksums dropped."""


def read_header(data: bytes, offset: int, file_size: int | None = None) -> BlockHeader:
    """The header at `offset` of `data`; `file_size` bounds the block when `data` holds only
    part of the file (the bytes from the header on)."""
    end = len(data) if file_size is None else file_size
    if offset < 0 or offset + HEADER_SIZE > len(data):
        raise HFileError(f"block header at offset {offset} runs past the end of the file")
    header = BlockHeader(*_HEADER.unpack_from(data, offset))
    if header.on_disk_size_without_header < 0 or offset + header.on_disk_size > end:
        raise HFileError(f"block at offset {offset} runs past the end of the file")
    if not HEADER_SIZE <= header.on_disk_data_size_with_header <= header.on_disk_size:
        raise HFileError(f"block at offset {offset} has an inconsistent on-disk data size")
    return header


def read_block(
    data: bytes,
    offset: int,
    compression: Compression,
    expected: bytes | None = None,
    verify_checksums: bool = True,
) -> Block:
    """Read, verify and decompress the block at `offset`; `expected` names the magic wanted."""
    header = read_header(data, offset)
    if expected is not None and header.magic != expected:
        raise HFileError(
            f"expected a {expected.decode()} block at offset {offset}, found {header.magic!r}"
        )
    data_end = offset + header.on_disk_data_size_with_header
    if verify_checksums and header.checksum_type != 0:
        _verify(data, offset, header)
    raw = data[offset + HEADER_SIZE : data_end]
    if compression == Compression.GZ:
        try:
            payload = zlib.decompressobj(47).decompress(raw)
        except zlib.error as err:
            raise HFileError(f"block at offset {offset} is not valid gzip: {err}") from err
    elif compression == Compression.NONE:
        payload = raw
    else:
        raise HFileError(f"compression codec {compression.name} is not supported")
    if len(payload) != header.uncompressed_size_without_header:
        raise HFileError(
            f"block at offset {offset} holds {len(payload)} bytes, "
            f"its header says {header.uncompressed_size_without_header}"
        )
    return Block(offset, header, payload)


def _verify(data: bytes, offset: int, header: BlockHeader) -> None:
    if header.checksum_type != CHECKSUM_CRC32C:
        raise HFileError(f"checksum type {header.checksum_type} is not supported")
    if header.bytes_per_checksum <= 0:
        raise HFileError(f"block at offset {offset} has no bytes per checksum")
    data_end = offset + header.on_disk_data_size_with_header
    stored = data[data_end : offset + header.on_disk_size]
    if chunk_checksums(data[offset:data_end], header.bytes_per_checksum) != stored:
        raise HFileError(f"checksum mismatch in block at offset {offset}")


def compress(payload: bytes, compression: Compression) -> bytes:
    if compression == Compression.NONE:
        return payload
    if compression == Compression.GZ:
        compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 31)
        stream = bytearray(compressor.compress(payload) + compressor.flush())
        stream[_GZIP_OS_BYTE] = 0  # Java's GZIPOutputStream writes OS 0 where zlib writes 3
        return bytes(stream)
    raise HFileError(f"compression codec {compression.name} is not supported")


def encode_block(
    magic: bytes, payload: bytes, prev_block_offset: int, compression: Compression
) -> bytes:
    """Header, compressed payload and checksums, ready to append to the file."""
    on_disk = compress(payload, compression)
    data_size_with_header = HEADER_SIZE + len(on_disk)
    num_chunks = max(1, -(-data_size_with_header // BYTES_PER_CHECKSUM))
    header = _HEADER.pack(
        magic,
        len(on_disk) + num_chunks * CHECKSUM_SIZE,
        len(payload),
        prev_block_offset,
        CHECKSUM_CRC32C,
        BYTES_PER_CHECKSUM,
        data_size_with_header,
    )
    body = header + on_disk
    return body + chunk_checksums(body, BYTES_PER_CHECKSUM)
