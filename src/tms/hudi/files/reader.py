"""Reading a file slice: its base file merged with the committed blocks of its log files.

This is the merge a compaction performs on each slice, and what a snapshot query sees.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from tms.hudi.files.data import block_records, read_base_file, read_log_file
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import BlockType, LogBlock
from tms.hudi.files.merge import DeleteVersion, merge_versions
from tms.hudi.storage import Storage


def committed_blocks(
    blocks_by_file: Sequence[Sequence[LogBlock]], is_committed: Callable[[str], bool]
) -> list[LogBlock]:
    """Data and delete blocks in write order, without blocks of uncommitted or rolled back
    instants (a rollback command block voids its target's blocks in the slice)."""
    rolled_back = {
        block.target_instant_time
        for blocks in blocks_by_file
        for block in blocks
        if block.block_type is BlockType.COMMAND and block.is_rollback
    }
    return [
        block
        for blocks in blocks_by_file
        for block in blocks
        if block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE)
        and block.instant_time not in rolled_back
        and is_committed(block.instant_time)
    ]


def read_file_slice(
    storage: Storage,
    file_slice: FileSlice,
    ordering_field: str | None,
    is_committed: Callable[[str], bool],
    schema: pa.Schema | None = None,
) -> tuple[pa.Table, int]:
    """The merged records of a slice, and how many log records were read to build them.

    `schema` is the table's current schema (meta columns included); records of older schemas
    are widened to it. Without one, the base file's (or first data block's) schema is used.
    """
    parts: list[pa.Table] = []
    positions: list[int] = []
    if file_slice.base_file is not None:
        base = read_base_file(storage, file_slice.base_file.path)
        parts.append(base)
        positions += [0] * base.num_rows
        schema = schema or base.schema
    blocks = committed_blocks(
        [read_log_file(storage, log.path) for log in file_slice.log_files], is_committed
    )
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
    data = pa.concat_tables(
        [part.select([n for n in schema.names if n in part.column_names]) for part in parts]
        if schema is not None
        else parts,
        promote_options="default",
    )
    if schema is not None:
        data = _conform(data, schema)
    return merge_versions(data, positions, deletes, ordering_field), log_records


def _conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """Columns in the schema's order and types; columns the data lacks become nulls."""
    columns = []
    for target in schema:
        if target.name in data.column_names:
            column = data.column(target.name)
            columns.append(column if column.type == target.type else column.cast(target.type))
        else:
            columns.append(pa.nulls(data.num_rows, target.type))
    return pa.Table.from_arrays(columns, schema=schema)
