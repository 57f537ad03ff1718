"""The metadata table update of a table service instant, written as the metadata table's delta
commit of the same instant time before the data table instant completes (Hudi 1.x's
`HoodieBackedTableMetadataWriter.update`).

What each service writes (`HoodieTableMetadataUtil.convertMetadataToRecords` and the indexers):

- compaction and clustering: `files` gets the new base files with their sizes (and the
  partition list record); `column_stats` one entry per indexed column of each new base file,
  from its Parquet footer, read by the Spark task that wrote it (`WrittenFile`);
  `partition_stats` recomputed for each touched partition from the file-level ranges of the
  files Hudi counts after the commit (`partition_stats.files_counted`: new files from their
  footers, the others from `column_stats`). Clustering also points `record_index` at the new
  file group of every record it rewrote (location instant = the clustering instant, no
  position), as the fixture's clustering instant shows: its Spark tasks write those log files
  into the delta commit the driver began (`record_index_logs`), so no key reaches the driver.
  Replaced file groups stay in `files` until clean deletes them; secondary indexes do not
  change (no record key or value moves). `bloom_filters` gets the bloom filter each new base
  file's footer holds (read back from the file, as Hudi's writer reads it).
- clean: `files` deletions of every deleted file, and for a partition the clean deleted
  (`isPartitionDeleted`) the delete of its files record and its entry in the partition list
  marked deleted instead (`updates.clean_files_update`); `column_stats` deletion entries of
  each deleted file, `bloom_filters` deletion entries of each deleted base file;
  `partition_stats` unchanged, as Hudi leaves them (a `DELETE_PARTITION` replacecommit's
  writer drops a partition's stats).

A data table rollback writes nothing to the metadata table: Hudi 1.x rolls back the metadata
table's delta commit of the rolled-back instant (`services.rollback`), and so do we.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import TableNotFoundError
from tms.hudi.files.bloom import footer_bloom_filter
from tms.hudi.files.data import read_footer
from tms.hudi.files.fs_view import BaseFile, FileSlice, FileSystemView
from tms.hudi.files.names import BaseFileName
from tms.hudi.metadata.column_stats import (
    ColumnRange,
    deletion_entries,
    file_ranges,
    range_from_payload,
)
from tms.hudi.metadata.index_defs import IndexVersion, column_stats_columns
from tms.hudi.metadata.partition_stats import (
    ColumnType,
    column_types,
    files_counted,
    partition_stats_entries,
)
from tms.hudi.metadata.partitions import (
    BLOOM_FILTERS,
    COLUMN_STATS,
    FILES,
    PARTITION_STATS,
    RECORD_INDEX,
)
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import (
    STATS_FIELD,
    MetadataRecord,
    stats_record,
)
from tms.hudi.metadata.rollback import rollback_delta_commit
from tms.hudi.metadata.stats_keys import column_stats_key
from tms.hudi.metadata.updates import (
    MetadataUpdate,
    bloom_filter_deletions,
    bloom_filter_records,
    clean_files_update,
    column_stats_records,
    commit_files_records,
)
from tms.hudi.metadata.writer import (
    PendingDeltaCommit,
    begin_delta_commit,
    finish_delta_commit,
)
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.timeline import Timeline

__all__ = ["MetadataSync", "StatsSpec", "WrittenFile", "file_stats"]


@dataclass(frozen=True)
class StatsSpec:
    """What a Spark task needs to compute the column stats of the file it wrote (picklable)."""

    columns: tuple[str, ...]
    version: IndexVersion


@dataclass(frozen=True)
class WrittenFile:
    """A new base file as its task reports it: the write stat and the file's column ranges
    (from its footer)."""

    stat: WriteStat
    ranges: tuple[ColumnRange, ...] = ()

    @property
    def file_name(self) -> str:
        return (self.stat.path or "").rsplit("/", 1)[-1]

    @property
    def partition(self) -> str:
        return self.stat.partition_path or ""

    @property
    def file_id(self) -> str:
        return self.stat.file_id or ""


def file_stats(storage: Storage, path: str, spec: StatsSpec | None) -> tuple[ColumnRange, ...]:
    """On the executor that wrote `path`: the column ranges of its footer (none without a
    column stats index)."""
    if spec is None:
        return ()
    return tuple(file_ranges(storage, path, spec.columns, spec.version))


@dataclass
class MetadataSync:
    """The metadata table of one data table, as a service keeps it in step."""

    table: HudiTable
    timeline: Timeline
    reader: MetadataTableReader
    columns: tuple[str, ...] = ()
    version: IndexVersion = IndexVersion.V1
    types: dict[str, ColumnType] = field(default_factory=dict)

    @classmethod
    def of(cls, table: HudiTable, timeline: Timeline | None = None) -> MetadataSync | None:
        """None for a table without a metadata table. Refusals (`UnsupportedTableError`:
        unknown index types, stats of a column type Hudi cannot write) come here, before
        anything is written; `services.table_refusals.ensure_supported` has checked the rest."""
        if not table.config.metadata_partitions:
            return None
        timeline = timeline or table.timeline()
        try:
            reader = MetadataTableReader.open(table.storage, table.config, timeline)
        except TableNotFoundError:
            return None
        sync = cls(table, timeline, reader)
        if COLUMN_STATS in reader.partitions:
            schema_json = timeline.latest_schema() or table.config.get("hoodie.table.create.schema")
            schema: dict[str, Any] = json.loads(schema_json) if schema_json else {}
            columns, version = column_stats_columns(reader.index_definitions, schema)
            sync.columns, sync.version = tuple(columns), version
            if version is not IndexVersion.V1:
                sync.types = column_types(schema, columns)
        return sync

    @property
    def stats_spec(self) -> StatsSpec | None:
        return StatsSpec(self.columns, self.version) if self.columns else None

    def _has(self, partition: str) -> bool:
        return partition in self.reader.partitions

    # Updates ---------------------------------------------------------------------------------

    def commit_update(
        self,
        instant_time: str,
        metadata: CommitMetadata,
        written: Sequence[WrittenFile],
        replaced: Mapping[str, Iterable[str]] | None = None,
    ) -> MetadataUpdate:
        """The update of a compaction (commit) or, with `replaced`, a clustering
        (replacecommit), but for the record index entries the clustering's tasks write: see
        the module docstring."""
        update = MetadataUpdate(records={FILES: commit_files_records(metadata)})
        if self._has(COLUMN_STATS):
            update.records[COLUMN_STATS] = column_stats_records(
                (w.partition, w.file_name, w.ranges) for w in written
            )
        if self._has(BLOOM_FILTERS):
            update.records[BLOOM_FILTERS] = self._bloom_filters(instant_time, written)
        if self._has(PARTITION_STATS) and self.columns:
            touched = sorted({w.partition for w in written})
            update.records[PARTITION_STATS] = self._partition_stats(
                instant_time, touched, written, replaced or {}
            )
        return update

    def clean_update(
        self,
        instant_time: str,
        deleted: Mapping[str, Sequence[str]],
        partitions_deleted: Collection[str] = (),
    ) -> MetadataUpdate:
        """The update of a clean: deleted file names by partition, and the partitions it
        deleted (their files records and partition list entries go). Partition stats are left
        as they are, as Hudi leaves them (the indexers' `buildClean` of a clean write `files`,
        `bloom_filters`, `column_stats` and expression indexes only)."""
        gone = {p: list(names) for p, names in deleted.items() if names}
        update = clean_files_update(gone, partitions_deleted)
        if self._has(COLUMN_STATS) and self.columns:
            update.records[COLUMN_STATS] = [
                stats_record(key, payload)
                for partition, names in sorted(gone.items())
                for name in names
                for key, payload in deletion_entries(partition, name, self.columns, self.version)
            ]
        if self._has(BLOOM_FILTERS):
            update.records[BLOOM_FILTERS] = bloom_filter_deletions(instant_time, gone)
        return update

    def _bloom_filters(
        self, instant_time: str, written: Sequence[WrittenFile]
    ) -> list[MetadataRecord]:
        """The `bloom_filters` records of the new base files, each filter read from the file's
        footer (one ranged read of its end); a file without one gets none, as Hudi skips it."""
        found = []
        for w in written:
            footer = read_footer(self.table.storage, w.stat.path or "").metadata
            bloom = footer_bloom_filter(footer)
            if bloom is not None:
                found.append((w.partition, w.file_name, bloom))
        return bloom_filter_records(instant_time, found)

    def _partition_stats(
        self,
        instant_time: str,
        partitions: Sequence[str],
        written: Sequence[WrittenFile],
        replaced: Mapping[str, Iterable[str]],
    ) -> list[MetadataRecord]:
        """Each touched partition's stats from the files Hudi counts after the commit."""
        view = FileSystemView.build(self.table.storage, self.timeline, partitions=partitions)
        new_by_group: dict[tuple[str, str], WrittenFile] = {
            (w.partition, w.file_id): w for w in written
        }
        new_ranges = {(p, w.file_name): w.ranges for (p, _), w in new_by_group.items()}
        records: list[MetadataRecord] = []
        for partition in partitions:
            gone = set(replaced.get(partition, ()))
            before = [
                s
                for s in view.latest_merged_file_slices(partition)
                if s.base_instant_time != instant_time
            ]
            after = [
                _with_new_base(s, new_by_group[(partition, s.file_id)], instant_time)
                if (partition, s.file_id) in new_by_group
                else s
                for s in before
                if s.file_id not in gone
            ]
            known = {s.file_id for s in after}
            after += [
                _with_new_base(FileSlice(partition, file_id, instant_time), w, instant_time)
                for (p, file_id), w in new_by_group.items()
                if p == partition and file_id not in known
            ]
            names = files_counted(before, after, gone)
            ranges = self._ranges(partition, names, new_ranges)
            entries = partition_stats_entries(partition, ranges, self.types, self.columns)
            records += [stats_record(k, v, partition_stats=True) for k, v in entries]
        return records

    def _ranges(
        self,
        partition: str,
        names: Sequence[str],
        new_ranges: Mapping[tuple[str, str], tuple[ColumnRange, ...]],
    ) -> list[ColumnRange]:
        """File-level ranges: new files' from their footers, others' from `column_stats`."""
        out: list[ColumnRange] = []
        keys: list[str] = []
        for name in names:
            if (partition, name) in new_ranges:
                out += new_ranges[(partition, name)]
            else:
                keys += [column_stats_key(partition, name, c) for c in self.columns]
        found = self.reader.lookup(COLUMN_STATS, keys)
        for key in keys:
            record = found.get(key)
            payload = record.fields.get(STATS_FIELD) if record else None
            if payload and not payload.get("isDeleted"):
                out.append(range_from_payload(payload))
        return out

    # Writing ---------------------------------------------------------------------------------

    def write(self, instant_time: str, update: MetadataUpdate) -> None:
        """Write the metadata table's delta commit `instant_time`, completed (`begin`)."""
        self.finish(self.begin(instant_time, update.partitions), update)

    def finish(
        self,
        pending: PendingDeltaCommit,
        update: MetadataUpdate,
        written: Sequence[WriteStat] = (),
    ) -> None:
        """Complete a delta commit `begin` started: `update`'s log files, and those Spark
        tasks wrote into it (`written`)."""
        finish_delta_commit(pending, update, written)

    def begin(self, instant_time: str, partitions: Sequence[str]) -> PendingDeltaCommit:
        """Begin the metadata table's delta commit `instant_time` for updates of `partitions`
        (those the metadata table has). One left by an earlier attempt of this instant (its
        data instant never completed) is rolled back first, as Hudi does before it writes an
        instant again."""
        storage = self.table.storage
        if MetadataTableReader.open(storage, self.table.config).timeline.get(instant_time):
            rollback_delta_commit(storage, instant_time)
        kept = [p for p in partitions if self._has(p)]
        return begin_delta_commit(storage, instant_time, kept)

    def clustering_partitions(self) -> list[str]:
        """The metadata partitions a clustering updates."""
        return [FILES, COLUMN_STATS, PARTITION_STATS, RECORD_INDEX, BLOOM_FILTERS]


def _with_new_base(piece: FileSlice, written: WrittenFile, instant_time: str) -> FileSlice:
    """A compacted (or new) file group's slice after the commit: the new base file and the
    log files written against the commit's instant."""
    name = BaseFileName.parse(written.file_name)
    assert name is not None, written.file_name
    base = BaseFile(name, written.stat.path or "", written.stat.file_size_in_bytes)
    logs = tuple(log for log in piece.log_files if log.name.base_instant_time == instant_time)
    return FileSlice(piece.partition_path, piece.file_id, instant_time, base, logs)
