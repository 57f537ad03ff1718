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

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.new_log_file import next_log_file_name
from tms.hudi.metadata.cells import location_value
from tms.hudi.metadata.partitions import RECORD_INDEX, MetadataPartition
from tms.hudi.metadata.records import RecordLocation, instant_millis
from tms.hudi.metadata.writer import (
    FileGroupLog,
    PendingDeltaCommit,
    log_file_content,
    log_write_stat,
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
    moved: Iterable[tuple[str, str, Iterable[str]]],
    write_token: str,
) -> list[WriteStat]:
    """On an executor: the new locations of `moved` records, given as (partition, file id,
    keys) of each new file, as log files of the record index; their write stats.

    Every key of one new file gets the same cell value (`location_value`, encoded once), and
    keys are routed to their file groups in bulk: per key, only its hash, its place in the
    sorted order and its cell remain."""
    owner = MetadataPartition(RECORD_INDEX)
    millis = instant_millis(target.instant_time)
    count = len(target.slices)
    routed: dict[int, dict[str, bytes]] = defaultdict(dict)
    for partition, file_id, keys in moved:
        value = location_value(RecordLocation(partition, file_id, millis), target.schema)
        for index, group in owner.keys_by_file_group(
            list(keys), count, target.index_version
        ).items():
            routed[index].update(dict.fromkeys(group, value))
    storage = Storage(target.metadata_uri)
    stats: list[WriteStat] = []
    for index in sorted(routed):
        values = routed[index]
        # Code point order is UTF-8 byte order, the order of an HFile's rows.
        ordered = sorted(values)
        cells = list(zip(map(str.encode, ordered), map(values.__getitem__, ordered), strict=True))
        write = FileGroupLog(RECORD_INDEX, target.slices[index], cells, [])
        name = next_log_file_name(target.layout, write.file_slice, target.instant_time, write_token)
        marker = Marker(RECORD_INDEX, str(name), MarkerType.APPEND)
        create_marker(storage, target.instant_time, marker)
        content = log_file_content(target.instant_time, target.schema, write)
        storage.write_bytes(marker.data_file_path, content, atomic=False)
        stats.append(log_write_stat(write, name, len(content)))
    return stats
