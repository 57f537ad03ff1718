"""Metadata table records: their types, typed views of their payloads, new records, and how two
records of one key combine (`HoodieMetadataPayload.preCombine`, `MetadataPartitionType.
combineMetadataPayloads`, `HoodieTableMetadataUtil.combineFileSystemMetadata` and
`mergeColumnStatsRecords` of Hudi 1.x).

A record is kept in the raw form `tms.hudi.metadata.schema` decodes (so it encodes back to the
same bytes) with its key taken from the HFile cell: Hudi empties the `key` field of every stored
value and restores it from the cell. A deleted key (a delete block's entry, or a delete that
won a combine) is `None`.
"""

from __future__ import annotations

import enum
import functools
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tms.hudi.metadata.keys import PARTITION_LIST_KEY, java_string_hash, partition_identifier

__all__ = [
    "ColumnStats",
    "FileInfo",
    "MetadataRecord",
    "RecordLocation",
    "RecordType",
    "combine",
    "files_record",
    "java_hash_map_order",
    "partition_list_record",
    "record_index_record",
    "secondary_index_record",
    "stats_record",
]

NAMESPACE = "org.apache.hudi.avro.model."
META_FIELDS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
FILES_FIELD = "filesystemMetadata"
BLOOM_FIELD = "BloomFilterMetadata"
STATS_FIELD = "ColumnStatsMetadata"
RECORD_INDEX_FIELD = "recordIndexMetadata"
SECONDARY_FIELD = "SecondaryIndexMetadata"
MISSING_FILE_INDEX = -1
"""`RECORD_INDEX_MISSING_FILEINDEX_FALLBACK`: a file id without a `-<n>` suffix."""
UUID_ENCODING = 0
RAW_STRING_ENCODING = 1


class RecordType(enum.IntEnum):
    """The `type` field: which payload a record carries (`MetadataPartitionType.recordType`)."""

    ALL_PARTITIONS = 1
    FILES = 2
    COLUMN_STATS = 3
    BLOOM_FILTERS = 4
    RECORD_INDEX = 5
    PARTITION_STATS = 6
    SECONDARY_INDEX = 7


@dataclass(frozen=True)
class FileInfo:
    """One file of a `files` record: its size, or a tombstone for a deleted file."""

    size: int
    is_deleted: bool = False


@dataclass(frozen=True)
class StatValue:
    """A column statistic as stored: the wrapper record's name and its value (raw)."""

    wrapper: str
    value: Any

    def sort_key(self) -> Any:
        """Natural order of Hudi's unwrapped values: decimals by their unscaled integer (one
        scale for all), bytes as Java's signed `ByteBuffer.compareTo`."""
        if self.wrapper == "DecimalWrapper":
            return int.from_bytes(self.value, "big", signed=True)
        if self.wrapper == "BytesWrapper":
            return [b - 256 if b > 127 else b for b in self.value]
        if self.wrapper == "ArrayWrapper":
            raise ValueError("array statistics have no order to merge by")
        return self.value


@dataclass(frozen=True)
class ColumnStats:
    """A column-stats or partition-stats payload (`HoodieMetadataColumnStats`)."""

    file_name: str | None
    column_name: str | None
    min_value: StatValue | None
    max_value: StatValue | None
    value_count: int | None
    null_count: int | None
    total_size: int | None
    total_uncompressed_size: int | None
    is_deleted: bool
    is_tight_bound: bool = False
    value_type: tuple[int, str | None] | None = None


@dataclass(frozen=True)
class RecordLocation:
    """Where the record index puts a record: data partition, file group, the commit that wrote
    it (epoch milliseconds, as stored) and, in 1.x, its position in the base file."""

    partition_path: str
    file_id: str
    instant_millis: int
    position: int | None = None

    def instant_time(self, tz: Any = None) -> str:
        """The instant as `yyyyMMddHHmmssSSS` in `tz` (Hudi formats in the writer's zone)."""
        moment = datetime.fromtimestamp(self.instant_millis / 1000, tz or UTC)
        return moment.strftime("%Y%m%d%H%M%S") + f"{self.instant_millis % 1000:03d}"


@functools.lru_cache(maxsize=4096)
def instant_millis(instant_time: str) -> int:
    """Epoch milliseconds of an instant time, as the record index stores it (ours are UTC).
    Cached: every key of a file slice asks for the same base instant."""
    moment = datetime.strptime(instant_time[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1000 + int(instant_time[14:17] or 0)


def _unwrap_stat(raw: Any) -> StatValue | None:
    if raw is None:
        return None
    if isinstance(raw, tuple):
        name, body = raw
    else:
        name, body = "StringWrapper", raw
    simple = str(name).rsplit(".", 1)[-1]
    value = body.get("wrappedValues") if simple == "ArrayWrapper" else body.get("value")
    return StatValue(simple, value)


def _wrap_stat(stat: StatValue | None) -> Any:
    if stat is None:
        return None
    key = "wrappedValues" if stat.wrapper == "ArrayWrapper" else "value"
    return (NAMESPACE + stat.wrapper, {key: stat.value})


@dataclass
class MetadataRecord:
    """One record of the metadata table: its key and its fields (raw Avro form)."""

    key: str
    fields: dict[str, Any] = field(repr=False)

    @property
    def type(self) -> int:
        return int(self.fields["type"])

    def files(self) -> dict[str, FileInfo]:
        """Files (or, in the partition list, partitions) this record lists, tombstones too."""
        listed = self.fields.get(FILES_FIELD) or {}
        return {
            name: FileInfo(int(info["size"]), bool(info["isDeleted"]))
            for name, info in listed.items()
        }

    def live_files(self) -> dict[str, int]:
        """Name → size of the files that are not deleted."""
        return {name: info.size for name, info in self.files().items() if not info.is_deleted}

    def column_stats(self) -> ColumnStats | None:
        raw = self.fields.get(STATS_FIELD)
        if raw is None:
            return None
        value_type = raw.get("valueType")
        return ColumnStats(
            file_name=raw.get("fileName"),
            column_name=raw.get("columnName"),
            min_value=_unwrap_stat(raw.get("minValue")),
            max_value=_unwrap_stat(raw.get("maxValue")),
            value_count=raw.get("valueCount"),
            null_count=raw.get("nullCount"),
            total_size=raw.get("totalSize"),
            total_uncompressed_size=raw.get("totalUncompressedSize"),
            is_deleted=bool(raw.get("isDeleted")),
            is_tight_bound=bool(raw.get("isTightBound", False)),
            value_type=None
            if value_type is None
            else (int(value_type["typeOrdinal"]), value_type.get("additionalInfo")),
        )

    def record_location(self) -> RecordLocation | None:
        raw = self.fields.get(RECORD_INDEX_FIELD)
        if raw is None:
            return None
        if int(raw.get("fileIdEncoding") or 0) == UUID_ENCODING:
            high, low = int(raw["fileIdHighBits"]), int(raw["fileIdLowBits"])
            file_id = str(uuid.UUID(int=((high & (2**64 - 1)) << 64) | (low & (2**64 - 1))))
            if int(raw["fileIndex"]) != MISSING_FILE_INDEX:
                file_id += f"-{int(raw['fileIndex'])}"
        else:
            file_id = str(raw["fileId"])
        return RecordLocation(
            str(raw["partitionName"]), file_id, int(raw["instantTime"]), raw.get("position")
        )

    def bloom_filter(self) -> dict[str, Any] | None:
        """The `HoodieMetadataBloomFilter` payload (type, timestamp, bloomFilter, isDeleted)."""
        raw: dict[str, Any] | None = self.fields.get(BLOOM_FIELD)
        return raw

    def secondary_is_deleted(self) -> bool:
        raw = self.fields.get(SECONDARY_FIELD)
        return bool(raw and raw.get("isDeleted"))

    def with_fields(self, **changes: Any) -> MetadataRecord:
        return MetadataRecord(self.key, {**self.fields, **changes})


def _new(key: str, record_type: RecordType, **payload: Any) -> MetadataRecord:
    """A record as Hudi's writers put it into a data block: meta fields null, `key` emptied."""
    fields: dict[str, Any] = {name: None for name in META_FIELDS}
    fields.update(
        key="",
        type=int(record_type),
        **{FILES_FIELD: None, BLOOM_FIELD: None, STATS_FIELD: None},
        **{RECORD_INDEX_FIELD: None, SECONDARY_FIELD: None},
    )
    fields.update(payload)
    return MetadataRecord(key, fields)


def java_hash_map_order(
    keys: Iterable[str], initial_capacity: int = 16, load_factor: float = 0.75
) -> list[str]:
    """The iteration order of a Java `HashMap<String, _>` that got `keys` put in this order:
    by bucket of the spread hash, insertion order within a bucket; the table doubles once it
    holds more than capacity × load factor entries."""
    ordered = list(dict.fromkeys(keys))
    capacity = 1
    while capacity < initial_capacity:
        capacity *= 2
    while len(ordered) > capacity * load_factor:
        capacity *= 2

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(ordered, key=lambda name: bucket(name))


def _file_info_map(
    entries: Mapping[str, FileInfo], initial_capacity: int = 16, load_factor: float = 0.75
) -> dict[str, Any]:
    order = java_hash_map_order(entries, initial_capacity, load_factor)
    return {
        name: {"size": entries[name].size, "isDeleted": entries[name].is_deleted} for name in order
    }


def partition_list_record(partitions: Iterable[str], deleted: bool = False) -> MetadataRecord:
    """`createPartitionListRecord`: partitions added (or deleted) by a commit."""
    entries = {partition_identifier(p): FileInfo(0, deleted) for p in partitions}
    return _new(
        PARTITION_LIST_KEY, RecordType.ALL_PARTITIONS, **{FILES_FIELD: _file_info_map(entries)}
    )


def files_record(
    partition_path: str, added: Mapping[str, int], deleted: Iterable[str] = ()
) -> MetadataRecord:
    """`createPartitionFilesRecord`: files added (name → size) and deleted in one partition."""
    gone = list(deleted)
    entries: dict[str, FileInfo] = {name: FileInfo(size) for name, size in added.items()}
    entries.update({name: FileInfo(0, True) for name in gone})
    bad = [name for name, info in entries.items() if not info.is_deleted and info.size <= 0]
    if bad:
        raise ValueError(f"files must have a size > 0 in the metadata table: {bad}")
    listing = _file_info_map(entries, max(len(added) + len(gone), 1), 1.0)  # HashMap<>(size, 1)
    return _new(partition_identifier(partition_path), RecordType.FILES, **{FILES_FIELD: listing})


def record_index_record(
    record_key: str,
    location: RecordLocation,
    *,
    raw_file_id: bool = False,
) -> MetadataRecord:
    """`createRecordIndexUpdate`: a UUID-shaped file id is stored as its two halves and index
    (encoding 0), anything else as the string (encoding 1)."""
    if raw_file_id:
        payload = {
            "partitionName": location.partition_path,
            "fileIdHighBits": -1,
            "fileIdLowBits": -1,
            "fileIndex": -1,
            "fileId": location.file_id,
            "instantTime": location.instant_millis,
            "fileIdEncoding": RAW_STRING_ENCODING,
            "position": location.position,
        }
    else:
        high, low, index = _file_id_bits(location.file_id)
        payload = {
            "partitionName": location.partition_path,
            "fileIdHighBits": high,
            "fileIdLowBits": low,
            "fileIndex": index,
            "fileId": "",
            "instantTime": location.instant_millis,
            "fileIdEncoding": UUID_ENCODING,
            "position": location.position,
        }
    return _new(record_key, RecordType.RECORD_INDEX, **{RECORD_INDEX_FIELD: payload})


@functools.lru_cache(maxsize=4096)
def _file_id_bits(file_id: str) -> tuple[int, int, int]:
    """A UUID-shaped file id (with its `-<index>`, or none) as the signed high and low halves
    and the index the record index stores (`HoodieRecordIndexInfo`); cached, since every key
    of a file group names the same one."""
    if len(file_id) == 36:
        as_uuid, index = uuid.UUID(file_id), MISSING_FILE_INDEX
    else:
        head, _, tail = file_id.rpartition("-")
        as_uuid, index = uuid.UUID(head), int(tail)
    high, low = as_uuid.int >> 64, as_uuid.int & (2**64 - 1)
    return (high - 2**64 if high >= 2**63 else high, low - 2**64 if low >= 2**63 else low, index)


def stats_record(
    key: str, payload: dict[str, Any], *, partition_stats: bool = False
) -> MetadataRecord:
    """A `column_stats` (or `partition_stats`) record of an already built key and
    `HoodieMetadataColumnStats` payload (`column_stats_entries`, `partition_stats_entries`)."""
    record_type = RecordType.PARTITION_STATS if partition_stats else RecordType.COLUMN_STATS
    return _new(key, record_type, **{STATS_FIELD: payload})


def bloom_filter_record(
    key: str, instant_time: str, type_code: str, bloom_filter: bytes, *, is_deleted: bool = False
) -> MetadataRecord:
    """`createBloomFilterMetadataRecord` for an already built key: the filter as the UTF-8
    bytes of its serialized text; a deleted file's with an empty type and no bytes."""
    payload = {
        "type": type_code,
        "timestamp": instant_time,
        "bloomFilter": bloom_filter,
        "isDeleted": is_deleted,
    }
    return _new(key, RecordType.BLOOM_FILTERS, **{BLOOM_FIELD: payload})


def secondary_index_record(key: str, is_deleted: bool = False) -> MetadataRecord:
    """`createSecondaryIndexRecord` for an already built `<secondary>$<record>` key."""
    return _new(key, RecordType.SECONDARY_INDEX, **{SECONDARY_FIELD: {"isDeleted": is_deleted}})


# ---------------------------------------------------------------------------------------------
# Combining two records of one key.


def combine(older: MetadataRecord | None, newer: MetadataRecord | None) -> MetadataRecord | None:
    """The record a reader keeps when `newer` follows `older` for one key (None = deleted):
    a delete wins over what came before and is forgotten by what comes after; files listings
    merge; column and partition stats widen unless the newer one is a tombstone or a tight
    bound; every other payload is replaced by the newer one."""
    if newer is None or older is None:
        return newer
    if older.type != newer.type:
        raise ValueError(f"cannot combine record types {older.type} and {newer.type}")
    if older.key != newer.key:
        raise ValueError(f"cannot combine keys {older.key!r} and {newer.key!r}")
    if newer.type in (RecordType.FILES, RecordType.ALL_PARTITIONS):
        return newer.with_fields(**{FILES_FIELD: _combine_files(older, newer)})
    if newer.type in (RecordType.COLUMN_STATS, RecordType.PARTITION_STATS):
        return newer.with_fields(**{STATS_FIELD: _combine_stats(older, newer)})
    return newer


def _combine_files(older: MetadataRecord, newer: MetadataRecord) -> dict[str, Any]:
    combined: dict[str, Any] = dict(older.fields.get(FILES_FIELD) or {})
    for name, info in (newer.fields.get(FILES_FIELD) or {}).items():
        if newer.type == RecordType.FILES and not info["isDeleted"] and info["size"] <= 0:
            raise ValueError(f"file {name!r} is listed with size {info['size']}")
        old = combined.get(name)
        if old is None:
            combined[name] = dict(info)  # a tombstone of an unknown file is carried forward
        elif info["isDeleted"]:
            if old["isDeleted"]:
                combined[name] = dict(info)
            else:
                del combined[name]
        else:
            combined[name] = {"size": max(int(info["size"]), int(old["size"])), "isDeleted": False}
    return combined


def _combine_stats(older: MetadataRecord, newer: MetadataRecord) -> dict[str, Any]:
    old_raw, new_raw = older.fields[STATS_FIELD], newer.fields[STATS_FIELD]
    old, new = older.column_stats(), newer.column_stats()
    assert old is not None and new is not None
    if old.column_name != new.column_name:
        raise ValueError(f"cannot combine stats of {old.column_name!r} and {new.column_name!r}")
    if new.is_deleted or old.is_deleted or new.is_tight_bound:
        return dict(new_raw)
    lows = [v for v in (old.min_value, new.min_value) if v is not None]
    highs = [v for v in (old.max_value, new.max_value) if v is not None]
    merged = dict(new_raw)
    merged.update(
        minValue=_wrap_stat(min(lows, key=StatValue.sort_key)) if lows else None,
        maxValue=_wrap_stat(max(highs, key=StatValue.sort_key)) if highs else None,
        valueCount=_sum(old.value_count, new.value_count),
        nullCount=_sum(old.null_count, new.null_count),
        totalSize=_sum(old.total_size, new.total_size),
        totalUncompressedSize=_sum(old.total_uncompressed_size, new.total_uncompressed_size),
        isDeleted=new.is_deleted,
        valueType=None,  # Hudi's builder does not carry it over
    )
    if "isTightBound" in old_raw or "isTightBound" in new_raw:
        merged["isTightBound"] = new.is_tight_bound
    return merged


def _sum(a: int | None, b: int | None) -> int:
    return (a or 0) + (b or 0)
