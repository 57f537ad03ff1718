"""Write handles: one file group's share of a batch written as one file, and its write stat.

As Hudi's `HoodieCreateHandle`, `HoodieMergeHandle` and `HoodieAppendHandle` do: inserts go to
new file groups, copy-on-write updates and deletes rewrite the latest base file as a new file
slice, merge-on-read ones append a log file holding a data or delete block to the latest file
slice (a log file is named by its slice's base instant in timeline layout 1, by the delta
commit writing it in layout 2). Files get Hudi's names, and each handle creates its marker
before writing, so a rollback of the instant finds the file. The instant itself (timeline,
heartbeat, commit metadata) is `tms.testing.sample_writer.writer`'s: a handle only knows the file it
writes.
"""

from __future__ import annotations

import enum
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.data import read_base_file, write_base_file, write_log_file
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.log_block import DeleteRecord
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.merge import DeleteVersion, latest_by_key, merge_versions
from tms.hudi.files.names import BaseFileName, new_file_id
from tms.hudi.files.new_log_file import next_log_file_name
from tms.hudi.files.reader import conform_table
from tms.hudi.merge_config import record_merging
from tms.hudi.meta_fields import COMMIT_SEQNO, FILE_NAME, PARTITION_PATH, RECORD_KEY
from tms.hudi.record_keys import virtual_key_generation, without_meta_values
from tms.hudi.table import HudiTable
from tms.hudi.timeline.layout import TimelineLayout
from tms.testing.sample_writer.log_blocks import LogBlockFormat, write_data_log_file

__all__ = ["WriteOperation", "append_log_file", "create_file_groups", "merge_base_file"]

WRITER_TOKEN = "0-1-0"


class WriteOperation(enum.StrEnum):
    INSERT = "INSERT"
    UPSERT = "UPSERT"
    DELETE = "DELETE"


def create_file_groups(
    table: HudiTable, rows: pa.Table, instant_time: str, max_file_rows: int
) -> list[WriteStat]:
    """Inserts: new file groups per partition, each one base file of at most `max_file_rows`."""
    writes: list[WriteStat] = []
    partitions = rows.column(PARTITION_PATH)
    for partition in sorted(set(pc.unique(partitions).to_pylist())):
        part_rows = rows.filter(pc.equal(partitions, partition))
        for start in range(0, part_rows.num_rows, max_file_rows):
            chunk = part_rows.slice(start, max_file_rows)
            file_id = new_file_id(0)
            name = BaseFileName(file_id, WRITER_TOKEN, instant_time)
            path = f"{partition}/{name}" if partition else str(name)
            create_marker(
                table.storage, instant_time, Marker(partition, str(name), MarkerType.CREATE)
            )
            file_rows = _file_rows(chunk, instant_time, str(name), len(writes))
            size = write_base_file(
                table.storage,
                path,
                _stored(table, file_rows),
                record_keys=file_rows.column(RECORD_KEY),
            )
            writes.append(
                WriteStat(
                    file_id=file_id,
                    path=path,
                    prev_commit="null",
                    partition_path=partition,
                    num_inserts=chunk.num_rows,
                    num_writes=chunk.num_rows,
                    total_write_bytes=size,
                    file_size_in_bytes=size,
                )
            )
    return writes


def merge_base_file(
    table: HudiTable,
    file_slice: FileSlice,
    rows: pa.Table,
    instant_time: str,
    operation: WriteOperation,
) -> WriteStat:
    """Copy-on-write: a new version of the base file with the batch merged in."""
    assert file_slice.base_file is not None
    storage, config = table.storage, table.config
    compared = record_merging(config).compared_fields
    ordering = compared[0] if compared else None
    existing = read_base_file(storage, file_slice.base_file.path)
    virtual = virtual_key_generation(config)
    if virtual is not None:
        existing = virtual.with_record_keys(existing)
    if operation is WriteOperation.DELETE:
        deletes = [
            DeleteVersion(key, _ordering(rows, ordering, i), 1)
            for i, key in enumerate(rows.column(RECORD_KEY).to_pylist())
        ]
        merged = merge_versions(existing, [0] * existing.num_rows, deletes, compared)
        updates = 0
    else:
        schema = _evolved_schema(existing.schema, rows.schema)
        combined = pa.concat_tables([conform_table(existing, schema), conform_table(rows, schema)])
        merged = latest_by_key(combined, compared)
        updates = rows.num_rows
    name = BaseFileName(file_slice.file_id, WRITER_TOKEN, instant_time)
    partition = file_slice.partition_path
    path = f"{partition}/{name}" if partition else str(name)
    create_marker(storage, instant_time, Marker(partition, str(name), MarkerType.MERGE))
    merged = merged.set_column(4, FILE_NAME, pa.array([str(name)] * merged.num_rows, pa.string()))
    size = write_base_file(
        storage, path, _stored(table, merged), record_keys=merged.column(RECORD_KEY)
    )
    deleted = existing.num_rows - merged.num_rows if operation is WriteOperation.DELETE else 0
    return WriteStat(
        file_id=file_slice.file_id,
        path=path,
        prev_commit=file_slice.base_instant_time,
        partition_path=partition,
        num_update_writes=updates,
        num_deletes=deleted,
        num_writes=merged.num_rows,
        total_write_bytes=size,
        file_size_in_bytes=size,
    )


def append_log_file(
    table: HudiTable,
    file_slice: FileSlice,
    rows: pa.Table,
    instant_time: str,
    operation: WriteOperation,
    schema_json: str | None,
    block_format: LogBlockFormat = LogBlockFormat.AVRO,
) -> WriteStat:
    """Merge-on-read: a new log file in the latest slice with a data block (Avro or Parquet)
    or a delete block."""
    storage, config = table.storage, table.config
    name = next_log_file_name(TimelineLayout.of(config), file_slice, instant_time, WRITER_TOKEN)
    log_instant = name.base_instant_time
    partition = file_slice.partition_path
    path = f"{partition}/{name}" if partition else str(name)
    create_marker(storage, instant_time, Marker(partition, str(name), MarkerType.APPEND))
    compared = record_merging(config).compared_fields
    ordering = compared[0] if compared else None
    if operation is WriteOperation.DELETE:
        schema: dict[str, Any] = (
            json.loads(schema_json)
            if schema_json
            else avro_record_schema(config.table_name, rows.schema)
        )
        deletes = [
            DeleteRecord(key, partition, _ordering(rows, ordering, i))
            for i, key in enumerate(rows.column(RECORD_KEY).to_pylist())
        ]
        size = write_log_file(
            storage, path, instant_time, schema, deletes=deletes, ordering_field=ordering
        )
        counts = {"num_deletes": rows.num_rows}
    else:
        rows = _stored(table, _file_rows(rows, instant_time, file_slice.file_id, 0))
        schema = avro_record_schema(config.table_name, rows.schema)
        size = write_data_log_file(storage, path, instant_time, schema, rows, block_format)
        counts = {"num_update_writes": rows.num_rows, "num_writes": rows.num_rows}
    base_name = file_slice.base_file.file_name if file_slice.base_file else ""
    return WriteStat(
        file_id=file_slice.file_id,
        path=path,
        prev_commit=log_instant,  # the instant the log file is named by, as Hudi records it
        partition_path=partition,
        total_write_bytes=size,
        file_size_in_bytes=size,
        log_version=name.version,
        log_offset=0,
        base_file=base_name,
        log_files=[str(name)],
        total_log_blocks=1,
        **counts,
    )


def read_keys(table: HudiTable, path: str) -> pa.Table:
    """The record keys of a base file, in `_hoodie_record_key`: stored, or computed from the
    data fields for a table without meta fields."""
    virtual = virtual_key_generation(table.config)
    if virtual is None:
        return read_base_file(table.storage, path, columns=[RECORD_KEY])
    return virtual.with_record_keys(read_base_file(table.storage, path)).select([RECORD_KEY])


def _stored(table: HudiTable, rows: pa.Table) -> pa.Table:
    """The rows as written to a file: a table without meta fields gets them null, as Hudi's
    writers leave them."""
    return rows if table.config.populate_meta_fields else without_meta_values(rows)


def _evolved_schema(existing: pa.Schema, incoming: pa.Schema) -> pa.Schema:
    """The schema a rewritten base file gets: the batch's types (widened ones included) for
    its columns, the file's for columns the batch lacks, then columns the batch adds."""
    fields = [
        incoming.field(f.name) if incoming.get_field_index(f.name) >= 0 else f for f in existing
    ]
    fields += [f for f in incoming if existing.get_field_index(f.name) < 0]
    return pa.schema(fields)


def _file_rows(rows: pa.Table, instant_time: str, file_name: str, partition_index: int) -> pa.Table:
    """The rows with the meta columns that name their file filled in (sequence number, file)."""
    n = rows.num_rows
    seqno = pc.binary_join_element_wise(
        pa.array([f"{instant_time}_{partition_index}"] * n, pa.string()),
        pc.cast(pa.array(range(n), pa.int64()), pa.string()),
        "_",
    )
    rows = rows.set_column(1, COMMIT_SEQNO, seqno)
    return rows.set_column(4, FILE_NAME, pa.array([file_name] * n, pa.string()))


def _ordering(rows: pa.Table, ordering: str | None, index: int) -> object | None:
    if ordering is None or ordering not in rows.column_names:
        return None
    value: object | None = rows.column(ordering)[index].as_py()
    return value
