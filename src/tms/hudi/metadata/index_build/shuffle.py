"""The Spark plumbing both index stages share: gathering base file ranges per data partition,
and shuffling `(metadata partition, key, value)` items so that Spark partition n holds the
cells of file group n (numbered end to end by a `FileGroupLayout`), one task per file group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tms.hudi.metadata.column_stats import ColumnRange
from tms.hudi.metadata.index_build.files import FileGroupLayout

__all__ = ["RANGES", "by_file_group", "ranges_by_partition", "records_only"]

RANGES = "ranges"
"""Stage one's items carrying a base file's ranges: (RANGES, data partition, ranges)."""


@dataclass(frozen=True)
class _Router:
    layout: FileGroupLayout

    def __call__(self, item: tuple[str, str, Any]) -> tuple[int, tuple[str, Any]]:
        return self.layout.route(item[0], item[1]), (item[1], item[2])


def _same(number: int) -> int:
    return number


def _concat(left: list[ColumnRange], right: list[ColumnRange]) -> list[ColumnRange]:
    return left + right


def _is_ranges(item: tuple[str, str, Any]) -> bool:
    return item[0] == RANGES


def _is_record(item: tuple[str, str, Any]) -> bool:
    return item[0] != RANGES


def _as_list(item: tuple[str, str, Any]) -> tuple[str, list[ColumnRange]]:
    return item[1], list(item[2])


def records_only(items: Any) -> Any:
    """Stage one's metadata records (its ranges left out)."""
    return items.filter(_is_record)


def ranges_by_partition(items: Any) -> Any:
    """Stage one's base file ranges, gathered per data partition: (partition, ranges)."""
    return items.filter(_is_ranges).map(_as_list).reduceByKey(_concat)


def by_file_group(records: Any, layout: FileGroupLayout) -> Any:
    """Records shuffled to their file group: Spark partition n holds `(n, (key, value))`."""
    return records.map(_Router(layout)).partitionBy(layout.total, _same)
