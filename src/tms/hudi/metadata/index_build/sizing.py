"""How many file groups a new metadata partition gets (`HoodieTableMetadataUtil.
estimateFileGroupCount` with the defaults of Hudi's metadata config)."""

from __future__ import annotations

import math
import struct

from tms.hudi.metadata.partitions import COLUMN_STATS, PARTITION_STATS, RECORD_INDEX

__all__ = ["FIXED_FILE_GROUP_COUNTS", "estimate_file_group_count", "file_group_count"]

RECORD_INDEX_MIN_FILE_GROUPS = 10
"""`hoodie.metadata.record.index.min.filegroup.count`."""
RECORD_INDEX_MAX_FILE_GROUPS = 10000
"""`hoodie.metadata.record.index.max.filegroup.count`."""
RECORD_INDEX_MAX_FILE_GROUP_BYTES = 1024 * 1024 * 1024
"""`hoodie.metadata.record.index.max.filegroup.size`."""
RECORD_INDEX_GROWTH_FACTOR = 2.0
"""`hoodie.metadata.record.index.growth.factor`."""
RECORD_INDEX_AVERAGE_RECORD_SIZE = 48
"""`RECORD_INDEX_AVERAGE_RECORD_SIZE`: bytes of one record index entry."""
FIXED_FILE_GROUP_COUNTS = {COLUMN_STATS: 2, PARTITION_STATS: 1}
"""`hoodie.metadata.index.column.stats.file.group.count` and the partition stats one."""


def estimate_file_group_count(
    record_count: int,
    average_record_size: int = RECORD_INDEX_AVERAGE_RECORD_SIZE,
    min_count: int = RECORD_INDEX_MIN_FILE_GROUPS,
    max_count: int = RECORD_INDEX_MAX_FILE_GROUPS,
    growth_factor: float = RECORD_INDEX_GROWTH_FACTOR,
    max_file_group_bytes: int = RECORD_INDEX_MAX_FILE_GROUP_BYTES,
) -> int:
    """File groups for `record_count` records: enough that each stays under the size limit
    once the records grow by `growth_factor`, within [min, max]; min == max fixes it."""
    if min_count == max_count and min_count != 0:
        return min_count
    expected = math.ceil(_float32(_float32(record_count) * _float32(growth_factor)))
    per_file_group = max_file_group_bytes // max(average_record_size, 1)
    estimated = expected // per_file_group
    if estimated >= max_count:
        return max_count
    if estimated <= min_count:
        return min_count
    return max(1, estimated)


def file_group_count(partition: str, record_count: int) -> int:
    """The file group count of a new `partition` holding `record_count` records."""
    if partition == RECORD_INDEX:
        return estimate_file_group_count(record_count)
    return FIXED_FILE_GROUP_COUNTS[partition]


def _float32(value: float) -> float:
    """Java's `float` arithmetic: the estimate multiplies in single precision."""
    rounded: float = struct.unpack(">f", struct.pack(">f", value))[0]
    return rounded
