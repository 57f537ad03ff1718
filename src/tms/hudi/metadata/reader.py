"""Reading the metadata table (`<base>/.hoodie/metadata`) as of a data table instant.

The metadata table is a merge-on-read table of its own. For one of its partitions the reader
builds that partition's file-system view alone (never the others'), takes the latest slices
(a pending compaction's logs merged into the slice before, as Hudi's readers do), and merges
each slice's base HFile and log blocks by key, keeping only blocks of valid instants
(`valid_instants`) at or before the instant read. A lookup of some keys reads only the file
groups those keys route to.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import cached_property

from tms.hudi.errors import TableNotFoundError
from tms.hudi.files.fs_view import FileSlice, FileSystemView
from tms.hudi.metadata.index_defs import IndexDefinition, read_index_definitions
from tms.hudi.metadata.keys import (
    PARTITION_LIST_KEY,
    column_stats_key,
    partition_identifier,
    partition_path_of,
    partition_stats_key,
    split_secondary_index_key,
)
from tms.hudi.metadata.partitions import (
    COLUMN_STATS,
    FILES,
    PARTITION_STATS,
    RECORD_INDEX,
    SECONDARY_INDEX_PREFIX,
    MetadataPartition,
    file_group_index,
)
from tms.hudi.metadata.records import ColumnStats, MetadataRecord, RecordLocation
from tms.hudi.metadata.slice_reader import read_slice, slice_schema
from tms.hudi.metadata.valid_instants import valid_instant_times
from tms.hudi.properties import PROPERTIES_PATH, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.timeline import Timeline

__all__ = ["METADATA_FOLDER", "MetadataTableReader", "metadata_storage"]

METADATA_FOLDER = ".hoodie/metadata"


def metadata_storage(storage: Storage) -> Storage:
    """The metadata table's own storage, on the data table's file system."""
    return Storage(storage.full_path(METADATA_FOLDER), fs=storage.fs)


@dataclass(frozen=True)
class MetadataTableReader:
    """The metadata table of one data table, read as of `as_of` (latest when None)."""

    data_storage: Storage
    data_config: TableConfig
    data_timeline: Timeline
    storage: Storage
    config: TableConfig
    timeline: Timeline
    as_of: str | None = None

    @classmethod
    def open(
        cls,
        data_storage: Storage,
        data_config: TableConfig | None = None,
        data_timeline: Timeline | None = None,
        as_of: str | None = None,
    ) -> MetadataTableReader:
        data_config = data_config or TableConfig.load(data_storage)
        data_timeline = data_timeline or Timeline.load(data_storage, data_config)
        storage = metadata_storage(data_storage)
        if not storage.exists(PROPERTIES_PATH):
            raise TableNotFoundError(f"{data_storage.base_path} has no metadata table")
        config = TableConfig.load(storage)
        timeline = Timeline.load(storage, config)
        if as_of is not None:
            data_timeline = _up_to(data_timeline, as_of)
            timeline = _up_to(timeline, as_of)
        return cls(data_storage, data_config, data_timeline, storage, config, timeline, as_of)

    # What the metadata table holds ---------------------------------------------------------

    @property
    def partitions(self) -> list[str]:
        """Metadata partitions the data table lists as built (its metadata partitions)."""
        return self.data_config.metadata_partitions

    @cached_property
    def valid_instants(self) -> frozenset[str]:
        return frozenset(valid_instant_times(self.data_timeline, self.timeline))

    def _valid(self, instant: str) -> bool:
        """A block counts when its instant is valid for the data table and completed on the
        metadata table's own timeline (or older than it, archived)."""
        if self.as_of is not None and instant > self.as_of:
            return False
        if instant not in self.valid_instants:
            return False
        instants = self.timeline.instants
        archived = bool(instants) and instant < instants[0].requested_time
        return archived or self.timeline.is_completed(instant)

    @cached_property
    def written_schema(self) -> str | None:
        """The record schema the metadata table's files carry (a base file's, else a log
        block's): what a version 6 table's own Hudi writes, so new records follow it."""
        for partition in self.partitions:
            for file_slice in self.file_slices(partition):
                found = slice_schema(self.storage, file_slice)
                if found:
                    return found
        return None

    @cached_property
    def index_definitions(self) -> dict[str, IndexDefinition]:
        return read_index_definitions(self.data_storage, self.data_config)

    def file_slices(self, partition: str) -> list[FileSlice]:
        """Latest slices of one metadata partition, in file group order."""
        view = FileSystemView.build(self.storage, self.timeline, partitions=[partition])
        owner = MetadataPartition(partition)
        slices = [s for s in view.latest_merged_file_slices(partition) if owner.owns(s.file_id)]
        return sorted(slices, key=lambda s: file_group_index(s.file_id))

    def writer_file_slices(self, partition: str) -> dict[str, FileSlice]:
        """File id → the slice a new log file of one metadata partition goes into: the new
        slice of a pending compaction where there is one (as Hudi's writers do)."""
        view = FileSystemView.build(self.storage, self.timeline, partitions=[partition])
        owner = MetadataPartition(partition)
        return {s.file_id: s for s in view.latest_file_slices(partition) if owner.owns(s.file_id)}

    def file_group_count(self, partition: str) -> int:
        return len(self.file_slices(partition))

    # Records ---------------------------------------------------------------------------------

    def read_partition(self, partition: str) -> dict[str, MetadataRecord]:
        """Every live record of one metadata partition, by key."""
        out: dict[str, MetadataRecord] = {}
        for file_slice in self.file_slices(partition):
            out.update(read_slice(self.storage, file_slice, self._valid).merged())
        return out

    def records(self, partition: str) -> Iterator[MetadataRecord]:
        """Every live record of one metadata partition, in key order."""
        merged = self.read_partition(partition)
        for key in sorted(merged):
            yield merged[key]

    def lookup(self, partition: str, keys: Collection[str]) -> dict[str, MetadataRecord]:
        """The live records of `keys`, reading only the file groups they route to."""
        slices = self.file_slices(partition)
        if not slices or not keys:
            return {}
        owner = MetadataPartition(partition)
        definition = self.index_definitions.get(partition)
        version = definition.version if definition else 1
        routed: dict[int, set[str]] = defaultdict(set)
        if definition is not None and definition.is_partitioned:
            routed = {i: set(keys) for i in range(len(slices))}  # routing unknown: search all
        else:
            for key in keys:
                routed[owner.file_group_of(key, len(slices), version)].add(key)
        out: dict[str, MetadataRecord] = {}
        for index, wanted in routed.items():
            found = read_slice(self.storage, slices[index], self._valid, wanted).merged()
            out.update(found)
        return out

    # Typed views -----------------------------------------------------------------------------

    def partition_list(self) -> list[str]:
        """Data partition paths the `files` partition lists."""
        record = self.lookup(FILES, [PARTITION_LIST_KEY]).get(PARTITION_LIST_KEY)
        return sorted(partition_path_of(p) for p in (record.live_files() if record else {}))

    def files(self, partition_path: str) -> dict[str, int]:
        """File name → size of the files of one data partition."""
        key = partition_identifier(partition_path)
        record = self.lookup(FILES, [key]).get(key)
        return record.live_files() if record else {}

    def all_files(self) -> dict[str, dict[str, int]]:
        """Files of every listed data partition (partitions without a record have none)."""
        records = self.read_partition(FILES)
        out: dict[str, dict[str, int]] = {}
        for partition in self.partition_list():
            record = records.get(partition_identifier(partition))
            out[partition] = record.live_files() if record else {}
        return out

    def column_stats(self, partition_path: str, file_name: str, column: str) -> ColumnStats | None:
        key = column_stats_key(partition_path, file_name, column)
        record = self.lookup(COLUMN_STATS, [key]).get(key)
        stats = record.column_stats() if record else None
        return None if stats is None or stats.is_deleted else stats

    def partition_stats(self, partition_path: str, column: str) -> ColumnStats | None:
        key = partition_stats_key(partition_path, column)
        record = self.lookup(PARTITION_STATS, [key]).get(key)
        stats = record.column_stats() if record else None
        return None if stats is None or stats.is_deleted else stats

    def record_locations(self, record_keys: Collection[str]) -> dict[str, RecordLocation]:
        """Record index lookup: where each of these record keys lives (absent keys left out)."""
        found = self.lookup(RECORD_INDEX, record_keys)
        return {
            key: location
            for key, record in found.items()
            if (location := record.record_location()) is not None
        }

    def secondary_index(self, index_name: str) -> list[tuple[str | None, str]]:
        """(secondary key, record key) of every live entry of a secondary index, sorted."""
        partition = (
            index_name
            if index_name.startswith(SECONDARY_INDEX_PREFIX)
            else SECONDARY_INDEX_PREFIX + index_name
        )
        entries = [
            split_secondary_index_key(record.key)
            for record in self.read_partition(partition).values()
            if not record.secondary_is_deleted()
        ]
        return sorted(entries, key=lambda e: (e[0] is not None, e[0] or "", e[1]))


def _up_to(timeline: Timeline, instant_time: str) -> Timeline:
    """The timeline as it was once `instant_time` was the latest request."""
    kept = tuple(i for i in timeline.instants if i.requested_time <= instant_time)
    return dataclasses.replace(timeline, instants=kept)
