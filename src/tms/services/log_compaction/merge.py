"""What a log compaction writes for one file slice, its base file left out: the slice's log
records merged key by key, each key's last word a record or a delete, and the instants the new
blocks stand for (Hudi's `LogCompactionExecutionHelper` over its log record reader).

The merge is the compaction's (`tms.hudi.files.merge`: ordering fields, commit-time ordering,
natural-order deletes), applied to the log blocks alone, as Hudi's reader merges a slice's log
records before it meets the base file. A key whose last word is a delete keeps the delete, with
the ordering value that decided it, so the base file's record still meets it as it did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.files.data import block_records
from tms.hudi.files.log_block import BlockType, DeleteRecord, LogBlock
from tms.hudi.files.merge import (
    DeleteVersion,
    Ordering,
    is_natural_order,
    latest_by_key,
    ordering_fields,
    ordering_less,
    ordering_values,
)
from tms.hudi.files.reader import DATA_AND_DELETE_BLOCKS, conform_table, merge_order
from tms.hudi.meta_fields import RECORD_KEY

__all__ = ["MergedLogs", "merge_log_blocks", "valid_block_instants"]


def valid_block_instants(
    blocks: Sequence[LogBlock], is_committed: Callable[[str], bool]
) -> list[str]:
    """The instants a log compaction's blocks stand for (`COMPACTED_BLOCK_TIMES`), as Hudi's
    `BaseHoodieLogRecordReader.scanInternalV2` finds them (`getValidBlockInstants`): each
    delta commit whose blocks no log compaction stands for, and for blocks a log compaction
    stands for, the last log compaction standing for them (not the instants it names). Hudi
    scans newest first; Hudi 1.2 writes the list oldest first, and so does this.
    `blocks` are the slice's blocks in write order, headers enough."""
    rolled_back = {b.target_instant_time for b in blocks if b.is_rollback}
    ordered: list[str] = []
    first_block: dict[str, LogBlock] = {}
    for block in blocks:
        if block.block_type not in DATA_AND_DELETE_BLOCKS:
            continue
        instant = block.instant_time
        if instant in rolled_back or not is_committed(instant) or instant in first_block:
            continue
        first_block[instant] = block
        ordered.append(instant)
    final: dict[str, str] = {}
    included: set[str] = set()
    valid: list[str] = []
    for instant in reversed(ordered):
        compacted = first_block[instant].compacted_block_times
        if compacted:
            for original in compacted:
                final[original] = final.get(instant, instant)
            continue
        stands = final.get(instant)
        chosen = instant if stands is None else stands
        if chosen not in included:
            included.add(chosen)
            valid.append(chosen)
    return valid[::-1]


@dataclass(frozen=True)
class MergedLogs:
    """A slice's log records merged: the records to write, the deletes to write after them,
    and the counts Hudi's write stat reports."""

    rows: pa.Table
    deletes: list[DeleteRecord]
    log_records: int
    """Records and deletes read from the blocks merged."""
    log_blocks: int
    """Blocks of the slice's log files (command blocks too), as Hudi's reader counts them."""
    rollback_blocks: int


def merge_log_blocks(
    blocks: Sequence[LogBlock],
    is_committed: Callable[[str], bool],
    ordering: Ordering,
    schema: pa.Schema,
    partition_path: str,
) -> MergedLogs:
    """The merged records and deletes of a slice's log blocks (decoded, in write order), in
    the table's `schema` (meta columns included): blocks of older schemas are widened to it."""
    parts: list[pa.Table] = [schema.empty_table()]
    positions: list[int] = []
    deletes: list[DeleteVersion] = []
    log_records = 0
    applied = [blocks[i] for i in merge_order(blocks, is_committed)]
    for position, block in enumerate(applied, start=1):
        if block.block_type is BlockType.DELETE:
            deletes += [
                DeleteVersion(d.record_key, d.ordering_value, position) for d in block.deletes
            ]
            log_records += len(block.deletes)
            continue
        records = conform_table(block_records(block, schema), schema)
        parts.append(records)
        positions += [position] * records.num_rows
        log_records += records.num_rows
    data = pa.concat_tables(parts)
    rows, kept = _last_words(data, positions, deletes, ordering)
    return MergedLogs(
        rows=rows,
        deletes=[DeleteRecord(d.record_key, partition_path, d.ordering_value) for d in kept],
        log_records=log_records,
        log_blocks=len(blocks),
        rollback_blocks=sum(1 for b in blocks if b.is_rollback),
    )


def _last_words(
    data: pa.Table, positions: Sequence[int], deletes: Sequence[DeleteVersion], ordering: Ordering
) -> tuple[pa.Table, list[DeleteVersion]]:
    """Per key, the surviving record or the deciding delete: `merge_versions`'s fold, which
    keeps the delete where it has the last word."""
    fields = ordering_fields(ordering)
    if not deletes:
        return latest_by_key(data, fields), []
    deleted_keys = pa.array(sorted({d.record_key for d in deletes}), pa.string())
    touched = pc.is_in(data.column(RECORD_KEY), value_set=deleted_keys)
    untouched = latest_by_key(data.filter(pc.invert(touched)), fields)
    rows = pc.indices_nonzero(touched).to_pylist()
    keys = pc.take(data.column(RECORD_KEY), rows).to_pylist() if rows else []
    values = ordering_values(data, rows, fields)
    versions: dict[str, list[tuple[int, int, object | None, int | DeleteVersion]]] = {}
    for seq, (row, key, value) in enumerate(zip(rows, keys, values, strict=True)):
        versions.setdefault(key, []).append((positions[row], seq, value, row))
    for seq, delete in enumerate(deletes, start=len(rows)):
        value = delete.ordering_value if fields else None  # commit-time ordering
        versions.setdefault(delete.record_key, []).append((delete.position, seq, value, delete))
    survivors: list[int] = []
    kept: list[DeleteVersion] = []
    for key_versions in versions.values():
        last = _fold(key_versions)
        if isinstance(last, DeleteVersion):
            kept.append(last)
        else:
            survivors.append(last)
    if not survivors:
        return untouched, kept
    return pa.concat_tables([untouched, data.take(sorted(survivors))]), kept


def _fold(
    versions: list[tuple[int, int, object | None, int | DeleteVersion]],
) -> int | DeleteVersion:
    """The last word on one key: `tms.hudi.files.merge`'s fold, but a delete that has it is
    returned rather than dropped."""
    current: int | DeleteVersion | None = None
    current_ordering: object | None = None
    natural_delete = False
    for _position, _seq, value, version in sorted(versions, key=lambda v: (v[0], v[1])):
        is_delete = isinstance(version, DeleteVersion)
        if is_delete and is_natural_order(value):
            current, current_ordering, natural_delete = version, None, True
            continue
        replaces = (
            current is None
            or current_ordering is None
            or natural_delete
            or value is None
            or not ordering_less(value, current_ordering)
        )
        if replaces:
            current, current_ordering, natural_delete = version, value, False
    assert current is not None
    return current
