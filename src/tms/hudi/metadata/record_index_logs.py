"""Record index entries written by the Spark tasks that moved the records, not the driver.

A clustering rewrites whole file groups: every record it moves needs a new `record_index`
location, and a table's worth of keys must not travel to the driver. Each task routes the keys
of the files it wrote to the record index's file groups and writes, into the pending delta
commit (`writer.begin_delta_commit`), one log file per file group it has keys for, named with
its own write token (a marker first, so a failed attempt's file is deleted and a crash rolled
back); it returns the write stats, which the driver adds to the delta commit. The keys of one
delta commit are disjoint across tasks, so readers merging a file group's log files by key see
each key once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.new_log_file import next_log_file_name
from tms.hudi.metadata.cells import location_value
from tms.hudi.metadata.partitions import RECORD_INDEX, MetadataPartition
from tms.hudi.metadata.records import RecordLocation, instant_millis
from tms.hudi.metadata.writer import (
    PendingDeltaCommit,
    delta_write_stat,
    hfile_log_block,
    hfile_writer,
)
from tms.hudi.storage import Storage
from tms.hudi.timeline.layout import TimelineLayout

__all__ = ["RecordIndexLogs", "record_index_logs", "write_record_index_logs"]


@dataclass(frozen=True)
class RecordIndexLogs:
    """What a task needs to write record index log files into a pending delta commit (small,
    picklable)."""

    metadata_uri: str
    instant_time: str
    schema: str
    layout: TimelineLayout
    slices: tuple[FileSlice, ...]
    """The writer slice of each record index file group, in file group order."""
    index_version: int


def record_index_logs(pending: PendingDeltaCommit) -> RecordIndexLogs:
    """The target of the tasks' record index log files in `pending`."""
    reader = pending.reader
    writer_slices = reader.writer_file_slices(RECORD_INDEX)
    slices = tuple(writer_slices[s.file_id] for s in reader.file_slices(RECORD_INDEX))
    definition = reader.index_definitions.get(RECORD_INDEX)
    return RecordIndexLogs(
        reader.storage.uri(""),
        pending.instant_time,
        pending.schema,
        TimelineLayout.of(reader.config),
        slices,
        definition.version if definition else 1,
    )


def write_record_index_logs(
    target: RecordIndexLogs,
    moved: Iterable[tuple[str, str, Iterable[str] | pa.Array | pa.ChunkedArray]],
    write_token: str,
) -> list[WriteStat]:
    """On an executor: the new locations of `moved` records, given as (partition, file id,
    keys) of each new file, as log files of the record index; their write stats. A file's
    keys may be an Arrow column (of strings, no nulls), read with no Python string made.

    Every key of one new file gets the same cell value (`location_value`, encoded once), and
    the keys are hashed, routed, sorted and framed as HFile cells in bulk (numpy and Arrow)."""
    millis = instant_millis(target.instant_time)
    columns: list[pa.StringArray] = []
    values: list[bytes] = []
    for partition, file_id, file_keys in moved:
        column = _key_column(file_keys)
        if len(column):
            location = RecordLocation(partition, file_id, millis)
            values.append(location_value(location, target.schema))
            columns.append(column)
    if not columns:
        return []
    keys = pa.concat_arrays(columns)
    counts = [len(column) for column in columns]
    owner = MetadataPartition(RECORD_INDEX)
    groups = owner.file_groups_of(keys, len(target.slices), target.index_version)
    value_of_key = np.repeat(np.arange(len(values)), counts)
    rows, order = _sorted_rows(keys, groups)
    groups, value_of_key = groups[order], value_of_key[order]
    starts = np.flatnonzero(np.diff(groups, prepend=-1)).tolist()
    storage = Storage(target.metadata_uri)
    stats: list[WriteStat] = []
    for start, end in zip(starts, [*starts[1:], len(groups)], strict=True):
        writer = hfile_writer(target.schema)
        writer.append_rows(rows.slice(start, end - start), values, value_of_key[start:end])
        content = hfile_log_block(target.instant_time, target.schema, writer.finish())
        file_slice = target.slices[int(groups[start])]
        name = next_log_file_name(target.layout, file_slice, target.instant_time, write_token)
        marker = Marker(RECORD_INDEX, str(name), MarkerType.APPEND)
        create_marker(storage, target.instant_time, marker)
        storage.write_bytes(marker.data_file_path, content, atomic=False)
        stats.append(delta_write_stat(RECORD_INDEX, file_slice, name, len(content), end - start, 0))
    return stats


def _sorted_rows(keys: pa.StringArray, groups: np.ndarray) -> tuple[pa.StringArray, np.ndarray]:
    """The keys by file group, then by their UTF-8 bytes (Arrow's order of strings, the order
    of an HFile's rows), each key once, and where each came from in `keys`. The sort is
    stable, so of a key moved to two new files the later file's location stays, as in a dict
    filled file by file."""
    table = pa.table({"group": groups, "key": keys})
    order = pc.sort_indices(table, [("group", "ascending"), ("key", "ascending")]).to_numpy()
    rows = keys.take(order)
    if len(rows) > 1:
        repeated = pc.equal(rows[1:], rows[:-1]).to_numpy(zero_copy_only=False)
        if repeated.any():
            order = order[np.append(~repeated, True)]
            rows = keys.take(order)
    return rows, order


def _key_column(keys: Iterable[str] | pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """A new file's keys as one Arrow column of strings."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    column = (
        keys.cast(pa.string())
        if isinstance(keys, pa.Array)
        else pa.array(keys if isinstance(keys, Sequence) else list(keys), pa.string())
    )
    if column.null_count:
        raise ValueError("a record key is null")
    return column
