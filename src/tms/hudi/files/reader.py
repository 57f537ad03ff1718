"""Reading a file slice: its base file merged with the committed blocks of its log files.

This is the merge a compaction performs on each slice, and what a snapshot query sees.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.files.data import block_records, read_base_file, read_log_file
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import BlockType, LogBlock
from tms.hudi.files.merge import DeleteVersion, Ordering, merge_versions
from tms.hudi.record_keys import KeyGeneration
from tms.hudi.storage import Storage


def committed_blocks(
    blocks_by_file: Sequence[Sequence[LogBlock]], is_committed: Callable[[str], bool]
) -> list[LogBlock]:
    """Data and delete blocks in the order a merge applies them (`merge_order`)."""
    blocks = [block for blocks in blocks_by_file for block in blocks]
    return [blocks[i] for i in merge_order(blocks, is_committed)]


DATA_AND_DELETE_BLOCKS = frozenset({BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE})
"""The blocks a data table's slice merges (a metadata table's are HFile data blocks)."""


def merge_order(
    blocks: Sequence[LogBlock],
    is_committed: Callable[[str], bool],
    kinds: Collection[BlockType] = DATA_AND_DELETE_BLOCKS,
) -> list[int]:
    """Indices of a slice's blocks (in write order, headers enough) that its merge applies,
    in the order it applies them.

    - Blocks of `kinds` (data and delete blocks) of committed instants only, without those a
      rollback command block of the slice voids.
    - A log compaction's blocks stand for the blocks whose instants their
      `COMPACTED_BLOCK_TIMES` name (a later log compaction's for an earlier one's too), which
      are left out; they are applied where the newest of those was, so a delta commit the
      log compaction did not include, written after it, is still applied after it (Hudi's
      `BaseHoodieLogRecordReader.scanInternalV2`, the scan log compaction itself reads with).
    """
    rolled_back = {block.target_instant_time for block in blocks if block.is_rollback}
    merged = [
        i
        for i, block in enumerate(blocks)
        if block.block_type in kinds
        and block.instant_time not in rolled_back
        and is_committed(block.instant_time)
    ]
    standing_for: dict[str, str] = {}
    """The instant of each compacted block → the instant of the log compaction that stands
    for it last."""
    for i in reversed(merged):
        block = blocks[i]
        stands = standing_for.get(block.instant_time, block.instant_time)
        for instant in block.compacted_block_times:
            standing_for.setdefault(instant, stands)
    newest: dict[str, int] = {}
    of_instant: dict[str, list[int]] = {}
    for i in merged:
        instant = blocks[i].instant_time
        of_instant.setdefault(instant, []).append(i)
        if instant in standing_for:
            newest[standing_for[instant]] = i
    order: list[int] = []
    for i in merged:
        instant = blocks[i].instant_time
        final = standing_for.get(instant)
        if final is not None:
            if newest[final] == i:
                order += of_instant.get(final, [])
        elif instant not in newest:
            order.append(i)
    return order


def read_file_slice(
    storage: Storage,
    file_slice: FileSlice,
    ordering: Ordering,
    is_committed: Callable[[str], bool],
    schema: pa.Schema | None = None,
    keys: KeyGeneration | None = None,
    base: pa.Table | None = None,
) -> tuple[pa.Table, int]:
    """The merged records of a slice, and how many log records were read to build them.

    `base` is the base file's rows when the caller has read them already (one read of the
    file, one GET on an object store).

    `schema` is the table's current schema (meta columns included); records of older schemas
    are widened to it. Without one, the base file's (or first data block's) schema is used.
    `keys` is given for a table without meta fields: records then merge by the key computed
    from their data fields, which the returned rows carry in `_hoodie_record_key`.
    """
    if file_slice.base_file is not None and base is None:
        base = read_base_file(storage, file_slice.base_file.path)
    blocks = committed_blocks(
        [read_log_file(storage, log.path) for log in file_slice.log_files], is_committed
    )
    return merge_slice_records(base, blocks, ordering, schema, keys)


def merge_slice_records(
    base: pa.Table | None,
    blocks: Sequence[LogBlock],
    ordering: Ordering,
    schema: pa.Schema | None = None,
    keys: KeyGeneration | None = None,
) -> tuple[pa.Table, int]:
    """`read_file_slice` on records already read: the base file's rows (None without one)
    and the committed blocks of the log files in write order."""
    parts: list[pa.Table] = []
    positions: list[int] = []
    if base is not None:
        parts.append(base)
        positions += [0] * base.num_rows
        schema = schema or base.schema
    deletes: list[DeleteVersion] = []
    log_records = 0
    for position, block in enumerate(blocks, start=1):
        if block.block_type is BlockType.DELETE:
            deletes += [
                DeleteVersion(d.record_key, d.ordering_value, position) for d in block.deletes
            ]
            log_records += len(block.deletes)
            continue
        records = block_records(block, schema)
        schema = schema or records.schema
        parts.append(records)
        positions += [position] * records.num_rows
        log_records += records.num_rows
    if not parts:
        return pa.table({}), log_records
    if schema is not None:
        data = pa.concat_tables([conform_table(part, schema) for part in parts])
    else:
        data = pa.concat_tables(parts, promote_options="default")
    if keys is not None:
        data = keys.with_record_keys(data)
    return merge_versions(data, positions, deletes, ordering), log_records


def conform_table(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` in the schema's column order and types, for schema evolution between files.

    A base file or log block written under an older (or newer) schema than the table's is
    read as Hudi reads it: columns (and nested struct fields) it lacks become nulls, ones the
    schema lacks are dropped, and widened types (int to long, float to double, ...) are cast.
    """
    columns = []
    for target in schema:
        if target.name in data.column_names:
            columns.append(conform_array(data.column(target.name), target.type))
        else:
            columns.append(pa.nulls(data.num_rows, target.type))
    return pa.Table.from_arrays(columns, schema=schema)


def conform_array(
    values: pa.Array | pa.ChunkedArray, target: pa.DataType
) -> pa.Array | pa.ChunkedArray:
    """One column (possibly nested) converted to ``target`` by field name, not position."""
    if values.type == target:
        return values
    if isinstance(values, pa.ChunkedArray):
        return pa.chunked_array([conform_array(c, target) for c in values.chunks], type=target)
    if pa.types.is_struct(target) and pa.types.is_struct(values.type):
        present = {values.type.field(i).name for i in range(values.type.num_fields)}
        children = [
            conform_array(values.field(f.name), f.type)
            if f.name in present
            else pa.nulls(len(values), f.type)
            for f in target
        ]
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=values.is_null() if values.null_count else None
        )
    if pa.types.is_list(target) and pa.types.is_list(values.type):
        items = conform_array(values.flatten(), target.value_type)
        offsets = pc.subtract(values.offsets, values.offsets[0])
        return pa.ListArray.from_arrays(
            offsets, items, type=target, mask=values.is_null() if values.null_count else None
        )
    if pa.types.is_map(target) and pa.types.is_map(values.type):
        # .keys and .items ignore a slice's offset; take the entries the slice spans.
        start = values.offsets[0].as_py()
        length = values.offsets[-1].as_py() - start
        keys = conform_array(values.keys.slice(start, length), target.key_type)
        items = conform_array(values.items.slice(start, length), target.item_type)
        offsets = pc.subtract(values.offsets, values.offsets[0])
        return pa.MapArray.from_arrays(
            offsets, keys, items, type=target, mask=values.is_null() if values.null_count else None
        )
    return values.cast(target)
