"""The Spark plumbing both index stages share: gathering base file ranges per data partition,
and shuffling `(metadata partition, key, value)` items so that Spark partition n holds the
cells of file group n (numbered end to end by a `FileGroupLayout`), one task per file group.

A slice's record index entries share one cell value (the key is the cell's row, not part of
the value), so they travel as one `KeyBatch` per slice and per file group, not as an item per
key: the shuffle then moves lists of keys, which costs a fraction of a tuple per key."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tms.hudi.metadata.column_stats import ColumnRange
from tms.hudi.metadata.index_build.files import CellPart, FileGroupLayout

__all__ = [
    "RANGES",
    "KeyBatch",
    "by_file_group",
    "cell_parts",
    "item_counts",
    "ranges_by_partition",
    "records_only",
]

RANGES = "ranges"
"""Stage one's items carrying a base file's ranges: (RANGES, data partition, ranges)."""


@dataclass(frozen=True)
class KeyBatch:
    """Keys of one metadata partition whose cells hold the same value."""

    keys: list[str]
    value: bytes


@dataclass(frozen=True)
class _Router:
    layout: FileGroupLayout

    def __call__(self, item: tuple[str, str, Any]) -> Iterator[tuple[int, tuple[str, Any]]]:
        partition, key, value = item
        if not isinstance(value, KeyBatch):
            yield self.layout.route(partition, key), (key, value)
            return
        for number, keys in self.layout.route_keys(partition, value.keys).items():
            yield number, ("", KeyBatch(keys, value.value))


def _count(item: tuple[str, str, Any]) -> tuple[str, int]:
    value = item[2]
    return item[0], len(value.keys) if isinstance(value, KeyBatch) else 1


def _add(left: int, right: int) -> int:
    return left + right


def item_counts(items: Any) -> dict[str, int]:
    """Records per kind of stage one's items (a batch counts its keys)."""
    return dict(items.map(_count).reduceByKey(_add).collectAsMap())


CELL_PART_ROWS = 65_536
"""Cells of single records gathered into one Arrow part."""


def cell_parts(routed: Iterable[tuple[int, tuple[str, Any]]]) -> Iterator[CellPart]:
    """A file group's cells as Arrow parts: a batch's keys as one part, single records
    gathered `CELL_PART_ROWS` at a time."""
    keys: list[str] = []
    values: list[bytes] = []
    for _, (key, value) in routed:
        if isinstance(value, KeyBatch):
            count = len(value.keys)
            yield pa.array(value.keys, pa.string()), pa.array([value.value] * count, pa.binary())
            continue
        keys.append(key)
        values.append(value)
        if len(keys) >= CELL_PART_ROWS:
            yield pa.array(keys, pa.string()), pa.array(values, pa.binary())
            keys, values = [], []
    if keys:
        yield pa.array(keys, pa.string()), pa.array(values, pa.binary())


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
    return records.flatMap(_Router(layout)).partitionBy(layout.total, _same)
