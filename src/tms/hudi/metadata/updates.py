"""What a data table instant changes in the metadata table, as records per metadata partition
(`HoodieTableMetadataUtil.convertMetadataToFilesPartitionRecords` and friends)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.files.bloom import FooterBloomFilter
from tms.hudi.files.names import BaseFileName
from tms.hudi.metadata.column_stats import ColumnRange
from tms.hudi.metadata.keys import bloom_filter_key, partition_identifier
from tms.hudi.metadata.partitions import FILES
from tms.hudi.metadata.records import (
    MetadataRecord,
    bloom_filter_record,
    files_record,
    partition_list_record,
    stats_record,
)
from tms.hudi.metadata.stats_keys import column_stats_key

__all__ = [
    "MetadataUpdate",
    "bloom_filter_deletions",
    "bloom_filter_records",
    "clean_files_update",
    "column_stats_records",
    "commit_files_records",
    "files_records",
]


@dataclass(frozen=True)
class MetadataUpdate:
    """Records to upsert and keys to delete, by metadata partition name."""

    records: dict[str, list[MetadataRecord]] = field(default_factory=dict)
    deletes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def partitions(self) -> list[str]:
        return sorted(set(self.records) | set(self.deletes))

    @classmethod
    def files(
        cls,
        added: Mapping[str, Mapping[str, int]] | None = None,
        deleted: Mapping[str, Iterable[str]] | None = None,
    ) -> MetadataUpdate:
        return cls(records={FILES: files_records(added or {}, deleted or {})})


def files_records(
    added: Mapping[str, Mapping[str, int]], deleted: Mapping[str, Iterable[str]]
) -> list[MetadataRecord]:
    """The partition list record naming the partitions files were added to (as a commit
    writes it), then one files record per partition touched."""
    records: list[MetadataRecord] = []
    if added:
        records.append(partition_list_record(added))
    gone = {partition: list(names) for partition, names in deleted.items()}
    for partition in sorted(set(added) | set(gone)):
        records.append(files_record(partition, added.get(partition, {}), gone.get(partition, [])))
    return records


def clean_files_update(
    deleted: Mapping[str, Iterable[str]], partitions_deleted: Iterable[str] = ()
) -> MetadataUpdate:
    """The `files` update of a clean (`convertMetadataToFilesPartitionRecords` of Hudi 1.1+):
    a files record of the deleted names per partition, but for a partition the clean deleted
    (`isPartitionDeleted`) a delete of its whole files record (`createPartitionFilesRecord`
    with `isPartitionDeleted`: an empty payload, written as a delete block's key), and the
    partition list record marking those partitions deleted."""
    dropped = sorted(set(partitions_deleted))
    records = [
        files_record(partition, {}, names)
        for partition, names in sorted(deleted.items())
        if partition not in dropped
    ]
    if dropped:
        records.append(partition_list_record(dropped, deleted=True))
    keys = [partition_identifier(partition) for partition in dropped]
    return MetadataUpdate(records={FILES: records}, deletes={FILES: keys} if keys else {})


def commit_files_records(metadata: CommitMetadata) -> list[MetadataRecord]:
    """`files` records of a commit: every file its write stats name, at the largest size any
    stat reports for it (stats of one file may come in any order)."""
    added: dict[str, dict[str, int]] = {}
    for partition, stats in metadata.partition_to_write_stats.items():
        sizes = added.setdefault(partition, {})
        for stat in stats:
            if not stat.path:
                continue
            name = stat.path.rsplit("/", 1)[-1]
            sizes[name] = max(sizes.get(name, 0), stat.file_size_in_bytes)
    return files_records(added, {})


def column_stats_records(
    new_files: Iterable[tuple[str, str, Sequence[ColumnRange]]],
) -> list[MetadataRecord]:
    """`column_stats` records of new base files: (partition, file name, its column ranges)."""
    return [
        stats_record(column_stats_key(partition, name, r.column_name), r.payload())
        for partition, name, ranges in new_files
        for r in ranges
    ]


def bloom_filter_records(
    instant_time: str, new_files: Iterable[tuple[str, str, FooterBloomFilter]]
) -> list[MetadataRecord]:
    """`bloom_filters` records of new base files: (partition, file name, its footer's filter),
    as Hudi's metadata writer reads them off the files it wrote."""
    return [
        bloom_filter_record(
            bloom_filter_key(partition, name),
            instant_time,
            found.type_code,
            found.serialized.encode(),
        )
        for partition, name, found in new_files
    ]


def bloom_filter_deletions(
    instant_time: str, deleted: Mapping[str, Iterable[str]]
) -> list[MetadataRecord]:
    """A clean's `bloom_filters` deletion records: one per deleted base file (log files have
    none), with an empty type and filter, as Hudi's clean writes them."""
    return [
        bloom_filter_record(
            bloom_filter_key(partition, name), instant_time, "", b"", is_deleted=True
        )
        for partition, names in sorted(deleted.items())
        for name in names
        if BaseFileName.parse(name) is not None
    ]
