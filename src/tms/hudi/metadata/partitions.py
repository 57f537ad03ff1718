"""Partitions of the metadata table, their file groups, and which file group a key lives in.

Each metadata partition (`MetadataPartitionType`) has a fixed file id prefix and record type; a
secondary or expression index partition is named `secondary_index_<name>` / `expr_index_<name>`
and prefixes its file groups with that name, `_` made `-`. A file group is
`<prefix><index:04d>-0` (`getFileIDForFileGroup`). How many file groups a partition has is
decided when it is built and read back from storage. A key goes to file group
`|javaHash(key)| % count` (`mapRecordKeyToFileGroupIndex`); secondary indexes of version 2 hash
only the escaped secondary key with its `$`, so every entry of one value shares a file group.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tms.hudi.metadata.keys import escaped_secondary_prefix, java_string_hash, java_string_hashes
from tms.hudi.metadata.records import RecordType

__all__ = [
    "MetadataPartition",
    "PartitionKind",
    "file_group_id",
    "file_group_index",
    "map_key_to_file_group",
    "map_keys_to_file_groups",
]

FILES = "files"
COLUMN_STATS = "column_stats"
BLOOM_FILTERS = "bloom_filters"
RECORD_INDEX = "record_index"
PARTITION_STATS = "partition_stats"
SECONDARY_INDEX_PREFIX = "secondary_index_"
EXPRESSION_INDEX_PREFIX = "expr_index_"


class PartitionKind(enum.Enum):
    """`MetadataPartitionType`: (partition name or prefix, file id prefix, record type)."""

    FILES = (FILES, "files-", RecordType.FILES)
    COLUMN_STATS = (COLUMN_STATS, "col-stats-", RecordType.COLUMN_STATS)
    BLOOM_FILTERS = (BLOOM_FILTERS, "bloom-filters-", RecordType.BLOOM_FILTERS)
    RECORD_INDEX = (RECORD_INDEX, "record-index-", RecordType.RECORD_INDEX)
    EXPRESSION_INDEX = ("expr_index", "expr-index-", None)
    SECONDARY_INDEX = ("secondary_index", "secondary-index-", RecordType.SECONDARY_INDEX)
    PARTITION_STATS = (PARTITION_STATS, "partition-stats-", RecordType.PARTITION_STATS)

    @property
    def partition_name(self) -> str:
        return str(self.value[0])

    @property
    def file_id_prefix(self) -> str:
        return str(self.value[1])


@dataclass(frozen=True)
class MetadataPartition:
    """One partition of the metadata table, by name."""

    name: str

    @property
    def kind(self) -> PartitionKind:
        """`fromPartitionPath`: the first kind whose name the partition starts with."""
        for kind in PartitionKind:
            if self.name.startswith(kind.partition_name):
                return kind
        raise ValueError(f"{self.name!r} is not a metadata table partition Hudi knows")

    @property
    def file_id_prefix(self) -> str:
        if self.kind in (PartitionKind.SECONDARY_INDEX, PartitionKind.EXPRESSION_INDEX):
            return self.name.replace("_", "-") + "-"
        return self.kind.file_id_prefix

    def file_group_id(self, index: int) -> str:
        return file_group_id(self.file_id_prefix, index)

    def owns(self, file_id: str) -> bool:
        """Whether a file id is one of this partition's file groups."""
        return re.fullmatch(re.escape(self.file_id_prefix) + r"\d{4,}(-0)?", file_id) is not None

    def file_group_of(self, key: str, count: int, index_version: int = 1) -> int:
        """The file group index a key is written to and looked up in."""
        if self.kind is PartitionKind.SECONDARY_INDEX and index_version >= 2:
            return map_key_to_file_group(escaped_secondary_prefix(key), count)
        return map_key_to_file_group(key, count)

    def file_groups_of(
        self, keys: Sequence[str] | pa.StringArray, count: int, index_version: int = 1
    ) -> np.ndarray:
        """`file_group_of` of many keys at once, hashed in bulk (an int64 array)."""
        hashed = keys
        if self.kind is PartitionKind.SECONDARY_INDEX and index_version >= 2:
            listed = keys.to_pylist() if isinstance(keys, pa.Array) else keys
            hashed = [escaped_secondary_prefix(key) for key in listed]
        return map_keys_to_file_groups(hashed, count)

    def keys_by_file_group(
        self, keys: Sequence[str], count: int, index_version: int = 1
    ) -> dict[int, list[str]]:
        """`file_group_of` of many keys at once: the keys of each file group, in their order."""
        if not keys:
            return {}
        groups = self.file_groups_of(keys, count, index_version)
        order = np.argsort(groups, kind="stable")
        ordered_groups = groups[order]
        starts = np.flatnonzero(np.diff(ordered_groups, prepend=-1)).tolist()
        ordered_keys = np.array(keys, dtype=object)[order]
        return {
            int(ordered_groups[start]): ordered_keys[start:end].tolist()
            for start, end in zip(starts, [*starts[1:], len(keys)], strict=True)
        }


def file_group_id(prefix: str, index: int) -> str:
    return f"{prefix}{index:04d}-0"


def file_group_index(file_id: str) -> int:
    """`getFileGroupIndexFromFileId`: `files-0003-0` (or 0.11's `files-0003`) is 3."""
    stem = file_id[:-2] if file_id.endswith("-0") else file_id
    return int(stem.rsplit("-", 1)[1])


def map_key_to_file_group(key: str, count: int) -> int:
    """`mapRecordKeyToFileGroupIndex`: Java's `Math.abs(Math.abs(hash) % count)`."""
    if count <= 0:
        raise ValueError("a metadata partition has at least one file group")
    # Java's |MIN_VALUE| stays negative and its remainder keeps the dividend's sign; the outer
    # abs makes both come out as |hash| % count.
    return abs(java_string_hash(key)) % count


def map_keys_to_file_groups(keys: Sequence[str] | pa.StringArray, count: int) -> np.ndarray:
    """`map_key_to_file_group` of many keys, hashed at once (an int64 array)."""
    if count <= 0:
        raise ValueError("a metadata partition has at least one file group")
    return np.abs(java_string_hashes(keys).astype(np.int64)) % count
