"""Merging versions of records: the latest value per record key by the ordering field.

Hudi's event-time ordering, folded over the versions of a key in write order: a record
replaces the current one when its ordering value is not lower; a delete carrying an ordering
value removes the current record when that value is not lower; a delete without one (natural
order, written as 0) always removes it, and a record written after it comes back.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.meta_fields import RECORD_KEY


@dataclass(frozen=True)
class DeleteVersion:
    """A delete of one key, written at `position` (the same scale as the data rows')."""

    record_key: str
    ordering_value: object | None
    position: int


def is_natural_order(ordering: object | None) -> bool:
    """Hudi writes 0 as the ordering value of a delete that carries none."""
    return ordering is None or (type(ordering) is int and ordering == 0)


def latest_by_key(table: pa.Table, ordering_field: str | None) -> pa.Table:
    """One row per `_hoodie_record_key`: the highest ordering value, the later row on a tie.

    Rows are taken to be in write order. Winners keep their relative order.
    """
    if table.num_rows <= 1:
        return table
    keys = table.column(RECORD_KEY)
    columns: dict[str, pa.ChunkedArray | pa.Array] = {"k": keys}
    if ordering_field:
        columns["o"] = table.column(ordering_field)
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
    ordering_field: str | None,
) -> pa.Table:
    """The merged rows of data versions and deletes, both placed in write order by position.

    `positions[i]` is where data row i was written (a base file first, then log blocks);
    rows of one position are in write order too.
    """
    if not deletes:
        return latest_by_key(data, ordering_field)
    deleted_keys = pa.array(sorted({d.record_key for d in deletes}), pa.string())
    touched = pc.is_in(data.column(RECORD_KEY), value_set=deleted_keys)
    untouched = latest_by_key(data.filter(pc.invert(touched)), ordering_field)
    touched_rows = pc.indices_nonzero(touched).to_pylist()
    position_list = positions.to_pylist() if isinstance(positions, pa.Array) else list(positions)
    keys = pc.take(data.column(RECORD_KEY), touched_rows).to_pylist() if touched_rows else []
    orderings = (
        pc.take(data.column(ordering_field), touched_rows).to_pylist()
        if ordering_field and touched_rows
        else [None] * len(touched_rows)
    )
    events: dict[str, list[tuple[int, int, object | None, int | None]]] = defaultdict(list)
    for seq, (row, key, ordering) in enumerate(zip(touched_rows, keys, orderings, strict=True)):
        events[key].append((position_list[row], seq, ordering, row))
    base = len(touched_rows)
    for seq, delete in enumerate(deletes):
        events[delete.record_key].append((delete.position, base + seq, delete.ordering_value, None))
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
            or not _less(ordering, current_ordering)
        )
        if replaces:
            current_row, current_ordering, natural_delete = row, ordering, False
    return current_row


def _less(left: object, right: object) -> bool:
    try:
        return bool(left < right)  # type: ignore[operator]
    except TypeError:
        return str(left) < str(right)
