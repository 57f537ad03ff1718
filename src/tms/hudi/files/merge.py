"""Merging versions of records: the latest value per record key by the ordering fields.

Hudi's event-time ordering, folded over the versions of a key in write order: a record
replaces the current one when its ordering value is not lower; a delete carrying an ordering
value removes the current record when that value is not lower; a delete without one (natural
order, written as 0) always removes it, and a record written after it comes back. Several
ordering fields compare as a tuple, field by field. Without ordering fields (commit-time
ordering, see `tms.hudi.merge_config`) the later write always wins.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.meta_fields import RECORD_KEY

Ordering: TypeAlias = str | Sequence[str] | None
"""The ordering fields merging compares: one name, several (a tuple), or none (the later write
wins); `RecordMerging.compared_fields` gives them for a table."""


def ordering_fields(ordering: Ordering) -> tuple[str, ...]:
    if ordering is None:
        return ()
    if isinstance(ordering, str):
        return (ordering,) if ordering else ()
    return tuple(ordering)


@dataclass(frozen=True)
class DeleteVersion:
    """A delete of one key, written at `position` (the same scale as the data rows')."""

    record_key: str
    ordering_value: object | None
    position: int


def is_natural_order(ordering: object | None) -> bool:
    """Hudi writes 0 as the ordering value of a delete that carries none."""
    return ordering is None or (type(ordering) is int and ordering == 0)


def latest_by_key(table: pa.Table, ordering: Ordering) -> pa.Table:
    """One row per `_hoodie_record_key`: the highest ordering value, the later row on a tie.

    Rows are taken to be in write order. Winners keep their relative order.
    """
    if table.num_rows <= 1:
        return table
    keys = table.column(RECORD_KEY)
    columns: dict[str, pa.ChunkedArray | pa.Array] = {"k": keys}
    for index, name in enumerate(ordering_fields(ordering)):
        columns[f"o{index}"] = table.column(name)
    columns["s"] = pa.array(range(table.num_rows), pa.int64())
    order = pc.sort_indices(
        pa.table(columns),
        sort_keys=[(name, "ascending") for name in columns],
    )
    sorted_keys = pc.take(keys, order).combine_chunks()
    differs = pc.not_equal(sorted_keys.slice(0, len(sorted_keys) - 1), sorted_keys.slice(1))
    is_last = pa.concat_arrays([differs, pa.array([True])])
    winners = pc.filter(order, is_last)
    return table.take(pc.take(winners, pc.sort_indices(winners)))


def merge_versions(
    data: pa.Table,
    positions: Sequence[int] | pa.Array,
    deletes: Sequence[DeleteVersion],
    ordering: Ordering,
) -> pa.Table:
    """The merged rows of data versions and deletes, both placed in write order by position.

    `positions[i]` is where data row i was written (a base file first, then log blocks);
    rows of one position are in write order too.
    """
    if not deletes:
        return latest_by_key(data, ordering)
    fields = ordering_fields(ordering)
    deleted_keys = pa.array(sorted({d.record_key for d in deletes}), pa.string())
    touched = pc.is_in(data.column(RECORD_KEY), value_set=deleted_keys)
    untouched = latest_by_key(data.filter(pc.invert(touched)), fields)
    touched_rows = pc.indices_nonzero(touched).to_pylist()
    position_list = positions.to_pylist() if isinstance(positions, pa.Array) else list(positions)
    keys = pc.take(data.column(RECORD_KEY), touched_rows).to_pylist() if touched_rows else []
    orderings = ordering_values(data, touched_rows, fields)
    events: dict[str, list[tuple[int, int, object | None, int | None]]] = defaultdict(list)
    for seq, (row, key, value) in enumerate(zip(touched_rows, keys, orderings, strict=True)):
        events[key].append((position_list[row], seq, value, row))
    base = len(touched_rows)
    for seq, delete in enumerate(deletes):
        # commit-time ordering: a delete's ordering value does not count either
        value = delete.ordering_value if fields else None
        events[delete.record_key].append((delete.position, base + seq, value, None))
    survivors = [row for versions in events.values() if (row := _fold(versions)) is not None]
    if not survivors:
        return untouched
    return pa.concat_tables([untouched, data.take(sorted(survivors))])


def _fold(versions: list[tuple[int, int, object | None, int | None]]) -> int | None:
    """The surviving data row of one key, or None when a delete has the last word."""
    current_row: int | None = None
    current_ordering: object | None = None
    natural_delete = False
    for _position, _seq, ordering, row in sorted(versions, key=lambda v: (v[0], v[1])):
        is_delete = row is None
        if is_delete and is_natural_order(ordering):
            current_row, current_ordering, natural_delete = None, None, True
            continue
        replaces = (
            current_ordering is None
            or natural_delete
            or ordering is None
            or not ordering_less(ordering, current_ordering)
        )
        if replaces:
            current_row, current_ordering, natural_delete = row, ordering, False
    return current_row


def ordering_values(data: pa.Table, rows: list[int], fields: tuple[str, ...]) -> list[object]:
    """The ordering value of each row: a scalar for one field, a tuple for several."""
    if not fields or not rows:
        return [None] * len(rows)
    columns: list[list[object]] = [pc.take(data.column(name), rows).to_pylist() for name in fields]
    if len(columns) == 1:
        return columns[0]
    return [
        None if all(v is None for v in values) else values for values in zip(*columns, strict=True)
    ]


def ordering_less(left: object, right: object) -> bool:
    """Whether ordering value `left` is lower than `right` (tuples field by field), as the
    merges of compaction and log compaction compare them."""
    if isinstance(left, tuple) != isinstance(right, tuple):
        # a delete records one ordering value; it meets a tuple at the tuple's first field
        left = left[0] if isinstance(left, tuple) else left
        right = right[0] if isinstance(right, tuple) else right
    if isinstance(left, tuple) and isinstance(right, tuple):
        for a, b in zip(left, right, strict=False):
            if a == b:
                continue
            if a is None or b is None:
                return b is None  # a missing value sorts last, as in `latest_by_key`
            return ordering_less(a, b)
        return len(left) < len(right)
    try:
        return bool(left < right)  # type: ignore[operator]
    except TypeError:
        return str(left) < str(right)
