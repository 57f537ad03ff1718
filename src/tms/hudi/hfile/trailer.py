"""The v3 trailer: magic, a delimited `FileTrailerProto`, zero padding, and the version int
(major in the low three bytes, minor in the top byte) in the file's last four bytes."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tms.hudi.errors import HFileError
from tms.hudi.hfile import protobuf as pb
from tms.hudi.hfile.format import (
    MAJOR_VERSION,
    MINOR_VERSION,
    TRAILER_SIZE,
    BlockType,
    Compression,
)

_NO_OFFSET = (1 << 64) - 1
"""How an unsigned uint64 field holds Java's -1 (no data block in the file)."""


@dataclass(frozen=True)
class Trailer:
    """`FileTrailerProto`'s fields (numbers 1-12), named as in Hudi's `HFileTrailer`."""

    file_info_offset: int
    load_on_open_data_offset: int
    uncompressed_data_index_size: int
    total_uncompressed_bytes: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator_class_name: str
    compression_codec: Compression
    major_version: int = MAJOR_VERSION
    minor_version: int = MINOR_VERSION


def _signed(value: int) -> int:
    return -1 if value == _NO_OFFSET else value


def decode_trailer(data: bytes) -> Trailer:
    if len(data) < TRAILER_SIZE:
        raise HFileError(f"{len(data)} bytes is too short for an HFile v3 (trailer is 4096)")
    (version,) = struct.unpack_from(">i", data, len(data) - 4)
    major, minor = version & 0x00FFFFFF, (version >> 24) & 0xFF
    start = len(data) - TRAILER_SIZE
    if data[start : start + 8] != BlockType.TRAILER:
        # Versions 1 and 2 have shorter trailers; Hudi's own writer has written major 0 with
        # a v3 trailer, so the trailer's position, not the version, decides.
        raise HFileError(f"no HFile v3 trailer (file says major version {major})")
    message, _ = pb.read_delimited(data[start : len(data) - 4], 8)
    fields = pb.parse_message(message)
    codec = pb.int_field(fields, 12)
    try:
        compression = Compression(codec)
    except ValueError as err:
        raise HFileError(f"unknown compression codec {codec}") from err
    return Trailer(
        file_info_offset=pb.int_field(fields, 1),
        load_on_open_data_offset=pb.int_field(fields, 2),
        uncompressed_data_index_size=pb.int_field(fields, 3),
        total_uncompressed_bytes=pb.int_field(fields, 4),
        data_index_count=pb.int_field(fields, 5),
        meta_index_count=pb.int_field(fields, 6),
        entry_count=pb.int_field(fields, 7),
        num_data_index_levels=pb.int_field(fields, 8, 1),
        first_data_block_offset=_signed(pb.int_field(fields, 9)),
        last_data_block_offset=_signed(pb.int_field(fields, 10)),
        comparator_class_name=pb.bytes_field(fields, 11).decode("utf-8", "replace"),
        compression_codec=compression,
        major_version=major,
        minor_version=minor,
    )


def encode_trailer(trailer: Trailer) -> bytes:
    message = b"".join(
        [
            pb.encode_varint_field(1, trailer.file_info_offset),
            pb.encode_varint_field(2, trailer.load_on_open_data_offset),
            pb.encode_varint_field(3, trailer.uncompressed_data_index_size),
            pb.encode_varint_field(4, trailer.total_uncompressed_bytes),
            pb.encode_varint_field(5, trailer.data_index_count),
            pb.encode_varint_field(6, trailer.meta_index_count),
            pb.encode_varint_field(7, trailer.entry_count),
            pb.encode_varint_field(8, trailer.num_data_index_levels),
            pb.encode_varint_field(9, trailer.first_data_block_offset),
            pb.encode_varint_field(10, trailer.last_data_block_offset),
            pb.encode_bytes_field(11, trailer.comparator_class_name.encode()),
            pb.encode_varint_field(12, int(trailer.compression_codec)),
        ]
    )
    body = BlockType.TRAILER + pb.write_delimited(message)
    version = (trailer.major_version & 0x00FFFFFF) | (trailer.minor_version << 24)
    return body.ljust(TRAILER_SIZE - 4, b"\x00") + struct.pack(">i", version)
