"""Constants of the HFile v3 format, as HBase 2.4 and Hudi's `hudi-io` define them."""

from __future__ import annotations

from enum import IntEnum
from typing import Final

HEADER_SIZE: Final = 33
"""magic(8) on-disk size without header(4) uncompressed size without header(4)
previous block of the same type(8) checksum type(1) bytes per checksum(4)
on-disk data size with header(4)."""

TRAILER_SIZE: Final = 4096
"""The v3 trailer's fixed size, version int included."""

MAJOR_VERSION: Final = 3
MINOR_VERSION: Final = 3

CHECKSUM_CRC32C: Final = 2
BYTES_PER_CHECKSUM: Final = 16384
CHECKSUM_SIZE: Final = 4

DEFAULT_BLOCK_SIZE: Final = 64 * 1024
DEFAULT_INDEX_BLOCK_SIZE: Final = 128 * 1024
"""HBase's `hfile.index.block.max.size`: an index chunk larger than this is split a level down."""
MIN_INDEX_NUM_ENTRIES: Final = 16
MAX_INDEX_LEVELS: Final = 16

LATEST_TIMESTAMP: Final = (1 << 63) - 1
TYPE_PUT: Final = 4
TYPE_MAXIMUM: Final = 255

DEFAULT_COMPARATOR: Final = "org.apache.hadoop.hbase.KeyValue$KVComparator"
PBUF_MAGIC: Final = b"PBUF"


class BlockType:
    """The 8-byte magic that opens each block."""

    DATA: Final = b"DATABLK*"
    LEAF_INDEX: Final = b"IDXLEAF2"
    INTERMEDIATE_INDEX: Final = b"IDXINTE2"
    ROOT_INDEX: Final = b"IDXROOT2"
    META: Final = b"METABLKc"
    FILE_INFO: Final = b"FILEINF2"
    TRAILER: Final = b'TRABLK"$'


class Compression(IntEnum):
    """Codec ordinals as the trailer stores them (HBase's `Compression.Algorithm`)."""

    LZO = 0
    GZ = 1
    NONE = 2
    SNAPPY = 3
    LZ4 = 4
    BZIP2 = 5
    ZSTD = 6


SUPPORTED_COMPRESSION: Final = (Compression.NONE, Compression.GZ)


class FileInfoKey:
    """Reserved file info keys HBase writes and reads."""

    KEY_VALUE_VERSION: Final = b"KEY_VALUE_VERSION"
    MAX_MEMSTORE_TS: Final = b"MAX_MEMSTORE_TS_KEY"
    AVG_KEY_LEN: Final = b"hfile.AVG_KEY_LEN"
    AVG_VALUE_LEN: Final = b"hfile.AVG_VALUE_LEN"
    CREATE_TIME_TS: Final = b"hfile.CREATE_TIME_TS"
    LAST_KEY: Final = b"hfile.LASTKEY"
    MAX_TAGS_LEN: Final = b"hfile.MAX_TAGS_LEN"
