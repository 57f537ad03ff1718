"""Hudi's log blocks (log format version 1): what merge-on-read tables append to log files.

A log file is a sequence of blocks; each block is laid out exactly as Java Hudi's
``HoodieLogFormatWriter`` writes it, all integers big-endian::

    MAGIC "#HUDI#"
    int64  block length      (everything after this field, up to and including the trailer)
    int32  log format version (1)
    int32  block type        (BlockType ordinal)
    header                   (int32 count, then per entry: int32 key ordinal, int32 byte
                              length, UTF-8 value)
    int64  content length
    bytes  content
    footer                   (same layout as the header; Hudi writes it empty)
    int64  trailer            (block length + len(MAGIC): the reverse pointer that readers use
                              to detect torn blocks)

Content by block type (the content version is ``LOG_BLOCK_VERSION`` = 3, the version
Hudi 0.14+ writes and hudi-rs requires):

- AVRO_DATA: int32 version, int32 record count, then per record int32 length + the record in
  Avro binary encoding under the SCHEMA header.
- DELETE: int32 version, int32 length, then one Avro datum of ``HoodieDeleteRecordList`` whose
  ordering values are wrapped in Hudi's per-type wrapper records (HUDI-5760).
- COMMAND: empty; the header says which command (``COMMAND_BLOCK_TYPE`` "0" = rollback of
  the blocks written by ``TARGET_INSTANT_TIME``).
- PARQUET_DATA: a whole Parquet file (footer key ``parquet.avro.schema`` holds the SCHEMA).

This module holds what the writer (``tms.hudi.files.log_writer``) and the reader
(``tms.hudi.files.log_reader``) must agree on: the constants, the enums of ordinals and the
decoded ``LogBlock``.
"""

from __future__ import annotations

import enum
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fastavro

from tms.hudi.errors import LogFormatError
from tms.hudi.storage.byte_range import RangeFile

__all__ = [
    "LOG_BLOCK_VERSION",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "BlockType",
    "CommandBlockType",
    "ContentRegion",
    "DeleteRecord",
    "HeaderKey",
    "LogBlock",
]

MAGIC = b"#HUDI#"
#: File-level log format version written after the block length.
LOG_FORMAT_VERSION = 1
#: Content version of data and delete blocks (Hudi 0.14+; hudi-rs accepts only 3).
LOG_BLOCK_VERSION = 3


class BlockType(enum.IntEnum):
    """Block type ordinals (Java ``HoodieLogBlockType``; serialized as the ordinal)."""

    COMMAND = 0
    DELETE = 1
    CORRUPTED = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    """Header/footer keys (Java ``HeaderMetadataType``; serialized as the ordinal)."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


class CommandBlockType(enum.IntEnum):
    """Value of the COMMAND_BLOCK_TYPE header (Java ``HoodieCommandBlockTypeEnum``)."""

    ROLLBACK_BLOCK = 0


@dataclass(frozen=True)
class DeleteRecord:
    """One key deleted by a delete block.

    ``ordering_value`` decides, per Hudi's event-time merging, whether the delete beats a
    record with the same key (it does when its value is >= the record's). ``None`` means
    "delete regardless of ordering"; it is written as Int 0, Hudi's own sentinel for that, so
    an Int ordering value of 0 also reads back as ``None``. Partition paths are carried
    but readers match deletes by record key within the file group.
    """

    record_key: str
    partition_path: str
    ordering_value: object | None = None


@dataclass(frozen=True)
class ContentRegion:
    """Where a block's content lies in its log file, left on disk: a data block of hundreds
    of MB is decoded from the file a chunk at a time, never held whole. Valid while the
    file is open (each read seeks: contents of many blocks of one file may be read in
    turns)."""

    stream: BinaryIO
    offset: int
    length: int

    def open(self, *, buffered: bool = True) -> BinaryIO:
        """The content as a seekable file: buffered reads of 1 MiB, or unbuffered (each read
        goes to the file: for a reader that reads whole blocks, with many contents open)."""
        raw = RangeFile(self._read_at, self.length)
        return io.BufferedReader(raw, 1 << 20) if buffered else raw  # type: ignore[return-value]

    def _read_at(self, at: int, length: int) -> bytes:
        self.stream.seek(self.offset + at)
        return self.stream.read(length)


@dataclass(frozen=True)
class LogBlock:
    """One decoded block: its type, header, and the records or deletes it carries."""

    block_type: BlockType
    header: Mapping[HeaderKey, str]
    records: Sequence[dict[str, object]] = ()
    deletes: Sequence[DeleteRecord] = ()
    footer: Mapping[HeaderKey, str] = field(default_factory=dict)
    #: Raw content of blocks this module does not decode (HFile, CDC, corrupted).
    content: bytes = b""
    #: A data or delete block read raw from a file: its content, left in the file.
    region: ContentRegion | None = None

    def content_stream(self, *, buffered: bool = True) -> BinaryIO:
        """The block's raw content as a file: from its log file, or from `content`."""
        if self.region is not None:
            return self.region.open(buffered=buffered)
        return io.BytesIO(self.content)

    @property
    def content_length(self) -> int:
        return self.region.length if self.region is not None else len(self.content)

    @property
    def instant_time(self) -> str:
        """The instant that wrote the block (readers drop blocks of uncommitted instants)."""
        try:
            return self.header[HeaderKey.INSTANT_TIME]
        except KeyError:
            raise LogFormatError(f"{self.block_type.name} block has no INSTANT_TIME") from None

    @property
    def target_instant_time(self) -> str | None:
        """For command blocks, the instant whose blocks the command applies to."""
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def compacted_block_times(self) -> tuple[str, ...]:
        """For a block a log compaction wrote, the instants of the blocks it stands for
        (`COMPACTED_BLOCK_TIMES`, comma-separated); empty for any other block."""
        times = self.header.get(HeaderKey.COMPACTED_BLOCK_TIMES, "")
        return tuple(t.strip() for t in times.split(",") if t.strip())

    @property
    def schema(self) -> dict[str, Any] | None:
        """The Avro writer schema from the SCHEMA header, parsed from JSON."""
        text = self.header.get(HeaderKey.SCHEMA)
        if text is None:
            return None
        parsed: dict[str, Any] = json.loads(text)
        return parsed

    @property
    def is_rollback(self) -> bool:
        """Whether this is a rollback command block."""
        return self.block_type is BlockType.COMMAND and self.header.get(
            HeaderKey.COMMAND_BLOCK_TYPE
        ) == str(int(CommandBlockType.ROLLBACK_BLOCK))


_PARSED_CACHE: dict[str, Any] = {}
_ARRAY_CACHE: dict[str, Any] = {}


def parsed_block_schema(schema_json: str) -> Any:
    """The fastavro form of a SCHEMA header, parsed once per distinct JSON text.

    The blocks of a file, and of a write, share one schema; the writer and the reader share
    this cache.
    """
    parsed = _PARSED_CACHE.get(schema_json)
    if parsed is None:
        if len(_PARSED_CACHE) > 64:
            _PARSED_CACHE.clear()
        parsed = fastavro.parse_schema(_plain_uuids(json.loads(schema_json)))
        _PARSED_CACHE[schema_json] = parsed
    return parsed


def parsed_block_array_schema(schema_json: str) -> Any:
    """The fastavro form of an Avro array of a SCHEMA header's records: a data block's
    records, framed as one array, decode in one call of fastavro's compiled reader."""
    parsed = _ARRAY_CACHE.get(schema_json)
    if parsed is None:
        if len(_ARRAY_CACHE) > 64:
            _ARRAY_CACHE.clear()
        items = _plain_uuids(json.loads(schema_json))
        parsed = fastavro.parse_schema({"type": "array", "items": items})
        _ARRAY_CACHE[schema_json] = parsed
    return parsed


def _plain_uuids(node: Any) -> Any:
    """The schema with ``uuid`` strings read as plain strings (fastavro would make them
    ``uuid.UUID`` objects, which Arrow does not take); the bytes are the same."""
    if isinstance(node, list):
        return [_plain_uuids(branch) for branch in node]
    if not isinstance(node, dict):
        return node
    out = {key: _plain_uuids(value) for key, value in node.items()}
    if out.get("logicalType") == "uuid" and out.get("type") == "string":
        del out["logicalType"]
    return out
