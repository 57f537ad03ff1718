"""The metadata table update of one writer commit, written as the metadata table's delta commit
of the same instant before the data table instant completes (Hudi 1.x's write path).

- `files`: every file the commit wrote (base and log files, with sizes) and the partition list;
- `column_stats`: entries of each new base file from its footer (copy-on-write tables only:
  Hudi also indexes log files from the records it appends, which this writer does not do, so
  a merge-on-read table with `column_stats` is refused before anything is written);
- `record_index`: the location of every inserted key (its new file group, the commit's instant
  time), and deletions of deleted keys; updated keys keep their location.

Any other metadata partition (`partition_stats`, secondary indexes, ...) is refused: the
writer would leave it stale.

A partition an index build lists in `hoodie.table.metadata.partitions.inflight` is kept like a
built one once its file groups exist (before that it is skipped: the build's catch-up covers
the commit), as Hudi's writers log to it; its column stats cover the columns the build's plan
names.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.errors import TableNotFoundError, UnsupportedTableError
from tms.hudi.metadata.column_stats import file_ranges
from tms.hudi.metadata.index_defs import IndexVersion, column_stats_columns
from tms.hudi.metadata.indexing import inflight_partitions, inflight_stats_columns
from tms.hudi.metadata.partitions import COLUMN_STATS, FILES, RECORD_INDEX
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import RecordLocation, instant_millis, record_index_record
from tms.hudi.metadata.updates import MetadataUpdate, column_stats_records, commit_files_records
from tms.hudi.table import HudiTable
from tms.hudi.timeline.timeline import Timeline

__all__ = ["WriterMetadata"]

KEPT_PARTITIONS = frozenset({FILES, COLUMN_STATS, RECORD_INDEX})


@dataclass(frozen=True)
class WriterMetadata:
    """What the writer keeps of a table's metadata table."""

    partitions: frozenset[str]
    columns: tuple[str, ...]
    version: IndexVersion

    @classmethod
    def of(cls, table: HudiTable, timeline: Timeline) -> WriterMetadata | None:
        """None without a metadata table; refusals before anything is written."""
        built = set(table.config.metadata_partitions)
        if not built and not inflight_partitions(table.config):
            return None
        try:
            reader = MetadataTableReader.open(table.storage, table.config, timeline)
        except TableNotFoundError:
            return None
        building = {p for p in inflight_partitions(table.config) if reader.file_slices(p)}
        kept = built | building
        others = sorted(kept - KEPT_PARTITIONS)
        if others:
            raise UnsupportedTableError(
                f"the writer keeps only {sorted(KEPT_PARTITIONS)} of the metadata table; "
                f"this table also has {others}"
            )
        columns: list[str] = []
        version = IndexVersion.V1
        if COLUMN_STATS in kept:
            if table.config.is_merge_on_read:
                raise UnsupportedTableError(
                    "column_stats on a merge-on-read table: the writer does not compute the "
                    "column stats of log files"
                )
            planned = inflight_stats_columns(timeline)
            if COLUMN_STATS in building and planned.found:
                columns, version = list(planned.columns), IndexVersion.parse(planned.version)
            else:
                schema_json = timeline.latest_schema() or table.config.get(
                    "hoodie.table.create.schema"
                )
                schema = json.loads(schema_json) if schema_json else {}
                columns, version = column_stats_columns(reader.index_definitions, schema)
        return cls(frozenset(kept), tuple(columns), version)

    def update(
        self,
        table: HudiTable,
        instant_time: str,
        metadata: CommitMetadata,
        inserted: dict[tuple[str, str], Sequence[str]],
        deleted: Sequence[str],
    ) -> MetadataUpdate:
        """`inserted`: record keys by new file group (partition, file id); `deleted`: keys."""
        update = MetadataUpdate(records={FILES: commit_files_records(metadata)})
        if COLUMN_STATS in self.partitions and self.columns:
            new_base_files = [
                (partition, stat.path, stat.path.rsplit("/", 1)[-1])
                for partition, stat in metadata.iter_write_stats()
                if stat.path and not stat.log_files
            ]
            update.records[COLUMN_STATS] = column_stats_records(
                (partition, name, file_ranges(table.storage, path, self.columns, self.version))
                for partition, path, name in new_base_files
            )
        if RECORD_INDEX in self.partitions:
            millis = instant_millis(instant_time)
            update.records[RECORD_INDEX] = [
                record_index_record(key, RecordLocation(partition, file_id, millis))
                for (partition, file_id), keys in sorted(inserted.items())
                for key in keys
            ]
            if deleted:
                update.deletes[RECORD_INDEX] = sorted(set(deleted))
        return update
