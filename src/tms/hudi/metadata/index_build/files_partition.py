"""Building the `files` partition, that is the metadata table itself, on a table without one
(Hudi's `initializeFromFilesystem`, run as an RFC-45 build instead of inside a writer).

Build: the metadata table is created (`table_config`), and its one `files` file group gets an
empty log file and a base HFile holding the partition list and each data partition's files as
of `U`, in the metadata table's delta commit `T` (bulk insert). A file counts when the instant
its name carries completed at or before `U` (a log file's is the delta commit that wrote it,
timeline layout 2) or was archived; files of failed or later writes are left out, and empty
files too (Hudi refuses sizes of 0).

Catch-up: every instant completed after `U` that no writer logged to `files` itself is applied
as the metadata table's delta commit of the same instant time (the files its write stats
name, the files its clean deleted), one after another: the delta commits a writer with the
metadata table on would have written. Not one 20-digit `T010` delta commit as for the other
partitions: readers planning their files from `files` (hudi-rs) skip 20-digit instants.

Version 6 tables are refused (`spec`): their log files sort by version, so a catch-up written
after the writers' own logs would apply older changes over newer ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from tms.hudi.files.data import write_partition_metadata
from tms.hudi.files.fs_view import list_partitions
from tms.hudi.files.marked_files import delete_unreported_files
from tms.hudi.files.markers import delete_markers
from tms.hudi.files.names import DEFAULT_WRITE_TOKEN, BaseFileName, LogFileName
from tms.hudi.memory import DEFAULT_RECORDS
from tms.hudi.metadata.cells import cell_value
from tms.hudi.metadata.index_build.files import (
    BULK_INSERT_OPERATION,
    NewFileGroup,
    complete_delta_commit,
    start_delta_commit,
    write_new_file_group,
)
from tms.hudi.metadata.index_build.spec import DataTable, IndexWrite
from tms.hudi.metadata.partitions import FILES
from tms.hudi.metadata.reader import MetadataTableReader, metadata_storage
from tms.hudi.metadata.schema import writer_schema
from tms.hudi.metadata.table_config import create_metadata_table
from tms.hudi.metadata.updates import (
    MetadataUpdate,
    clean_files_update,
    commit_files_records,
    files_records,
)
from tms.hudi.metadata.writer import write_delta_commit
from tms.hudi.properties import PROPERTIES_PATH, TableConfig
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.timeline import Timeline

__all__ = ["build_files_partition", "catch_up_files", "committed_files"]


def committed_files(table: DataTable, timeline: Timeline, as_of: str) -> dict[str, dict[str, int]]:
    """Partition → file name → size of every data file committed at or before `as_of`."""
    completed = {
        i.requested_time for i in timeline.instants if i.is_completed and i.requested_time <= as_of
    }
    earliest = timeline.instants[0].requested_time if timeline.instants else ""

    def committed(instant_time: str) -> bool:
        return instant_time in completed or instant_time < earliest

    found: dict[str, dict[str, int]] = {}
    for partition in list_partitions(table.storage):
        sizes: dict[str, int] = {}
        for entry in table.storage.list_dir(partition):
            if entry.is_dir or entry.size <= 0:
                continue
            base = BaseFileName.parse(entry.name)
            log = LogFileName.parse(entry.name) if base is None else None
            named = base.instant_time if base else log.base_instant_time if log else None
            if named is not None and committed(named):
                sizes[entry.name] = entry.size
        if sizes:
            found[partition] = sizes
    return found


def build_files_partition(
    table: DataTable, timeline: Timeline, as_of: str, instant_time: str
) -> IndexWrite:
    """Create the metadata table with its `files` partition as of `as_of`, written as its
    completed delta commit `instant_time`."""
    md_storage = metadata_storage(table.storage)
    if md_storage.exists(PROPERTIES_PATH):
        md_config = TableConfig.load(md_storage)
    else:
        md_config = create_metadata_table(md_storage, table.config)
    files = committed_files(table, timeline, as_of)
    schema = writer_schema(table.config.table_version, None)
    records = files_records(files, {})
    write_partition_metadata(md_storage, FILES, instant_time)
    inflight = start_delta_commit(md_storage, md_config, instant_time, BULK_INSERT_OPERATION)
    target = NewFileGroup(md_storage.base_path, instant_time, schema, DEFAULT_RECORDS)
    cells = (
        pa.array([record.key for record in records], pa.string()),
        pa.array([cell_value(record, schema) for record in records], pa.binary()),
    )
    written = write_new_file_group(target, FILES, 0, [cells], DEFAULT_WRITE_TOKEN)
    stats = [written.stat] if written.stat is not None else []
    delete_unreported_files(md_storage, instant_time, {s.path for s in stats if s.path})
    complete_delta_commit(md_storage, md_config, inflight, BULK_INSERT_OPERATION, schema, stats)
    delete_markers(md_storage, instant_time)
    return IndexWrite(
        file_groups=1,
        files_written=len(stats) + 1,
        bytes_written=sum(s.total_write_bytes for s in stats) + written.log_bytes,
        records_written=len(records),
        data_file_groups=sum(len(names) for names in files.values()),
    )


def _files_update(timeline: Timeline, instant: Instant) -> MetadataUpdate:
    """What one completed data instant changed in `files`."""
    if instant.action is Action.CLEAN:
        metadata = timeline.clean_metadata(instant)
        deleted = {
            str(partition): [
                str(path).rsplit("/", 1)[-1]
                for path in cleaned.get("successDeleteFiles")
                or cleaned.get("deletePathPatterns")
                or []
            ]
            for partition, cleaned in (metadata.get("partitionMetadata") or {}).items()
        }
        dropped = [
            str(partition)
            for partition, cleaned in (metadata.get("partitionMetadata") or {}).items()
            if cleaned.get("isPartitionDeleted")
        ]
        return clean_files_update(deleted, dropped)
    return MetadataUpdate(records={FILES: commit_files_records(timeline.commit_metadata(instant))})


def catch_up_files(table: DataTable, timeline: Timeline, instants: Sequence[Instant]) -> IndexWrite:
    """Apply each of `instants` (completed data instants after `U` no writer logged) as the
    metadata table's delta commit of its own instant time, in completion order."""
    ordered = sorted(instants, key=lambda i: i.completion_time or i.requested_time)
    files_written = records_written = 0
    for instant in ordered:
        reader = MetadataTableReader.open(table.storage, TableConfig.load(table.storage))
        if reader.timeline.get(instant.requested_time) is not None:
            continue  # a writer logged it meanwhile
        update = _files_update(timeline, instant)
        if not update.records[FILES]:
            continue
        done = write_delta_commit(table.storage, instant.requested_time, update, reader=reader)
        files_written += len(done.log_files)
        records_written += len(update.records[FILES])
    return IndexWrite(
        file_groups=1 if files_written else 0,
        files_written=files_written,
        bytes_written=0,
        records_written=records_written,
        data_file_groups=0,
    )
