"""Typed commit metadata of Hudi's timeline: write stats per partition, extra metadata, replaces.

Layout 1 (table version <= 7) stores commit / deltacommit / replacecommit metadata as JSON that
Hudi's Jackson mapper writes from ``HoodieCommitMetadata`` (field visibility, pretty printed);
layout 2 (table version >= 8) stores the Avro records ``HoodieCommitMetadata`` /
``HoodieReplaceCommitMetadata``. These models read both and write both, in Hudi's exact JSON
shape (camelCase keys in Java field order, nulls written) so Hudi and hudi-rs read what we write.
Unknown fields are tolerated: unknown write-stat fields are kept in ``extra`` and written back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from tms.hudi import avro_codec
from tms.hudi.jackson import dumps_jackson

__all__ = [
    "NULL_COMMIT",
    "CommitMetadata",
    "ReplaceCommitMetadata",
    "RuntimeStats",
    "WriteStat",
    "dumps_jackson",
]

NULL_COMMIT = "null"
"""``prevCommit`` Hudi writes for a file group created by the commit (an insert)."""

SCHEMA_KEY = "schema"
"""Key of the writer's Avro schema in ``extraMetadata``."""

# Counters are Java primitives (``long``): absent or null reads as 0.
_COUNTERS: tuple[tuple[str, str], ...] = (
    ("num_writes", "numWrites"),
    ("num_deletes", "numDeletes"),
    ("num_update_writes", "numUpdateWrites"),
    ("num_inserts", "numInserts"),
    ("total_write_bytes", "totalWriteBytes"),
    ("total_write_errors", "totalWriteErrors"),
    ("total_log_records", "totalLogRecords"),
    ("total_log_files_compacted", "totalLogFilesCompacted"),
    ("total_log_size_compacted", "totalLogSizeCompacted"),
    ("total_updated_records_compacted", "totalUpdatedRecordsCompacted"),
    ("total_log_blocks", "totalLogBlocks"),
    ("total_corrupt_log_block", "totalCorruptLogBlock"),
    ("total_rollback_blocks", "totalRollbackBlocks"),
    ("file_size_in_bytes", "fileSizeInBytes"),
)
_COUNTER_ATTR_BY_KEY = {key: attr for attr, key in _COUNTERS}

# HoodieWriteStat's fields in Java declaration order: the order Jackson writes them.
_JSON_BASE_KEYS: tuple[str, ...] = (
    "fileId",
    "path",
    "cdcStats",
    "prevCommit",
    "numWrites",
    "numDeletes",
    "numUpdateWrites",
    "numInserts",
    "totalWriteBytes",
    "totalWriteErrors",
    "tempPath",
    "partitionPath",
    "totalLogRecords",
    "totalLogFilesCompacted",
    "totalLogSizeCompacted",
    "totalUpdatedRecordsCompacted",
    "totalLogBlocks",
    "totalCorruptLogBlock",
    "totalRollbackBlocks",
    "fileSizeInBytes",
    "minEventTime",
    "maxEventTime",
    "runtimeStats",
)
# HoodieDeltaWriteStat adds these after the base fields.
_JSON_DELTA_KEYS: tuple[str, ...] = ("logVersion", "logOffset", "baseFile", "logFiles")
_JSON_KNOWN_KEYS = frozenset(_JSON_BASE_KEYS + _JSON_DELTA_KEYS)

# Avro HoodieWriteStat fields without a typed attribute here; kept in ``extra`` when set.
_AVRO_ONLY_KEYS = ("prevBaseFile", "totalLogReadTimeMs", "numUpdates")

# Values of getters that Jackson serialized in old Hudi releases (0.5 - 0.10); derived, so
# dropped on read and never written back.
_LEGACY_DERIVED_KEYS = frozenset(
    {
        "fileIdAndRelativePaths",
        "totalRecordsDeleted",
        "totalLogRecordsCompacted",
        "totalLogFilesCompacted",
        "totalCompactedRecordsUpdated",
        "totalLogFilesSize",
        "totalScanTime",
        "totalCreateTime",
        "totalUpsertTime",
        "minAndMaxEventTime",
        "writePartitionPaths",
        "writeStats",
    }
)


def _int(value: Any, key: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    return value


def _opt_int(value: Any, key: str) -> int | None:
    return None if value is None else _int(value, key)


def _opt_str(value: Any, key: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{key}: expected a string, got {value!r}")


def _str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: expected a list of strings, got {value!r}")
    return list(value)


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{key}: expected an object, got {value!r}")
    return value


def _is_log_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith(".") and ".log." in name


@dataclass
class RuntimeStats:
    """Timings (ms) of one write task; informational only."""

    total_scan_time: int = 0
    total_upsert_time: int = 0
    total_create_time: int = 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read the JSON or Avro form (same keys in both)."""
        return cls(
            total_scan_time=_int(data.get("totalScanTime"), "totalScanTime"),
            total_upsert_time=_int(data.get("totalUpsertTime"), "totalUpsertTime"),
            total_create_time=_int(data.get("totalCreateTime"), "totalCreateTime"),
        )

    def to_json_dict(self) -> dict[str, Any]:
        """Jackson's field order of ``HoodieWriteStat.RuntimeStats``."""
        return {
            "totalScanTime": self.total_scan_time,
            "totalUpsertTime": self.total_upsert_time,
            "totalCreateTime": self.total_create_time,
        }

    def to_avro(self) -> dict[str, Any]:
        """The ``HoodieRuntimeStats`` Avro record."""
        return {
            "totalScanTime": self.total_scan_time,
            "totalCreateTime": self.total_create_time,
            "totalUpsertTime": self.total_upsert_time,
        }


@dataclass
class WriteStat:
    """What one task wrote to one file of a file group (``HoodieWriteStat``).

    A delta write stat (``HoodieDeltaWriteStat``, MOR log appends) also carries ``log_version``,
    ``log_offset``, ``base_file`` and ``log_files``; any of them set makes the stat a delta stat.
    Paths are relative to the table's base path.
    """

    file_id: str | None = None
    path: str | None = None
    prev_commit: str | None = None
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    num_inserts: int = 0
    total_write_bytes: int = 0
    total_write_errors: int = 0
    temp_path: str | None = None
    partition_path: str | None = None
    total_log_records: int = 0
    total_log_files_compacted: int = 0
    total_log_size_compacted: int = 0
    total_updated_records_compacted: int = 0
    total_log_blocks: int = 0
    total_corrupt_log_block: int = 0
    total_rollback_blocks: int = 0
    file_size_in_bytes: int = 0
    min_event_time: int | None = None
    max_event_time: int | None = None
    cdc_stats: dict[str, int] | None = None
    runtime_stats: RuntimeStats | None = None
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields this model does not know, kept so a read-modify-write loses nothing."""

    @property
    def is_delta(self) -> bool:
        """True for a ``HoodieDeltaWriteStat`` (a log-file append of a MOR table)."""
        return (
            self.log_version is not None
            or self.log_offset is not None
            or self.base_file is not None
            or self.log_files is not None
        )

    @property
    def is_insert(self) -> bool:
        """True when this write created the file group (no previous commit)."""
        return self.prev_commit in (None, NULL_COMMIT)

    @classmethod
    def _common(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            attr: _int(data.get(key), key) for attr, key in _COUNTERS if key in data
        }
        kwargs["file_id"] = _opt_str(data.get("fileId"), "fileId")
        kwargs["path"] = _opt_str(data.get("path"), "path")
        kwargs["prev_commit"] = _opt_str(data.get("prevCommit"), "prevCommit")
        kwargs["temp_path"] = _opt_str(data.get("tempPath"), "tempPath")
        kwargs["partition_path"] = _opt_str(data.get("partitionPath"), "partitionPath")
        kwargs["min_event_time"] = _opt_int(data.get("minEventTime"), "minEventTime")
        kwargs["max_event_time"] = _opt_int(data.get("maxEventTime"), "maxEventTime")
        cdc = data.get("cdcStats")
        if cdc is not None:
            kwargs["cdc_stats"] = {
                str(k): _int(v, "cdcStats") for k, v in _mapping(cdc, "cdcStats").items()
            }
        runtime = data.get("runtimeStats")
        if runtime is not None:
            kwargs["runtime_stats"] = RuntimeStats.from_dict(_mapping(runtime, "runtimeStats"))
        kwargs["log_version"] = _opt_int(data.get("logVersion"), "logVersion")
        kwargs["log_offset"] = _opt_int(data.get("logOffset"), "logOffset")
        kwargs["base_file"] = _opt_str(data.get("baseFile"), "baseFile")
        log_files = data.get("logFiles")
        if log_files is not None:
            kwargs["log_files"] = _str_list(log_files, "logFiles")
        return kwargs

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read one element of ``partitionToWriteStats`` in Hudi's JSON form."""
        data = _mapping(data, "write stat")
        kwargs = cls._common(data)
        kwargs["extra"] = {k: v for k, v in data.items() if k not in _JSON_KNOWN_KEYS}
        return cls(**kwargs)

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> Self:
        """Read a decoded ``HoodieWriteStat`` Avro record (timeline layout 2)."""
        record = _mapping(record, "write stat")
        kwargs = cls._common(record)
        if record.get("totalLogFilesCompacted") is None and record.get("totalLogFiles") is not None:
            kwargs["total_log_files_compacted"] = _int(record["totalLogFiles"], "totalLogFiles")
        kwargs["extra"] = {
            key: record[key] for key in _AVRO_ONLY_KEYS if record.get(key) is not None
        }
        return cls(**kwargs)

    def to_json_dict(self) -> dict[str, Any]:
        """Hudi's JSON form, keys in the order Jackson writes them."""
        out: dict[str, Any] = {}
        for key in _JSON_BASE_KEYS:
            attr = _COUNTER_ATTR_BY_KEY.get(key)
            if attr is not None:
                out[key] = getattr(self, attr)
            elif key == "runtimeStats":
                out[key] = None if self.runtime_stats is None else self.runtime_stats.to_json_dict()
            elif key == "cdcStats":
                out[key] = None if self.cdc_stats is None else dict(self.cdc_stats)
            else:
                out[key] = getattr(self, _OPTIONAL_ATTRS[key])
        if self.is_delta:
            out["logVersion"] = self.log_version or 0
            out["logOffset"] = self.log_offset or 0
            out["baseFile"] = self.base_file
            out["logFiles"] = list(self.log_files or [])
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    def to_avro(self) -> dict[str, Any]:
        """The ``HoodieWriteStat`` Avro record (timeline layout 2)."""
        out: dict[str, Any] = {key: getattr(self, attr) for attr, key in _COUNTERS}
        out.update(
            fileId=self.file_id,
            path=self.path,
            prevCommit=self.prev_commit,
            partitionPath=self.partition_path,
            tempPath=self.temp_path,
            minEventTime=self.min_event_time,
            maxEventTime=self.max_event_time,
            cdcStats=None if self.cdc_stats is None else dict(self.cdc_stats),
            runtimeStats=None if self.runtime_stats is None else self.runtime_stats.to_avro(),
            logVersion=self.log_version,
            logOffset=self.log_offset,
            baseFile=self.base_file,
            logFiles=None if self.log_files is None else list(self.log_files),
        )
        for key in _AVRO_ONLY_KEYS:
            if key in self.extra:
                out[key] = self.extra[key]
        return out


_OPTIONAL_ATTRS = {
    "fileId": "file_id",
    "path": "path",
    "prevCommit": "prev_commit",
    "tempPath": "temp_path",
    "partitionPath": "partition_path",
    "minEventTime": "min_event_time",
    "maxEventTime": "max_event_time",
}


@dataclass
class CommitMetadata:
    """Metadata of a completed commit, deltacommit or compaction (``HoodieCommitMetadata``).

    ``partition_to_write_stats`` maps a partition path ("" for a non-partitioned table) to the
    stats of the files written there. ``extra_metadata`` holds e.g. the writer schema under
    ``"schema"``. A compaction's commit has ``compacted=True`` and operation type ``COMPACT``.
    """

    AVRO_SCHEMA: ClassVar[str] = "HoodieCommitMetadata"

    partition_to_write_stats: dict[str, list[WriteStat]] = field(default_factory=dict)
    compacted: bool = False
    extra_metadata: dict[str, str] = field(default_factory=dict)
    operation_type: str = "UNKNOWN"
    extra: dict[str, Any] = field(default_factory=dict)
    """Unknown top-level JSON fields, written back after the known ones."""

    # -- reading -------------------------------------------------------------------------------

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any], avro: bool) -> dict[str, Any]:
        stats: dict[str, list[WriteStat]] = {}
        raw_stats = data.get("partitionToWriteStats")
        if raw_stats is not None:
            for partition, items in _mapping(raw_stats, "partitionToWriteStats").items():
                if not isinstance(items, list):
                    raise ValueError(f"partitionToWriteStats[{partition!r}]: expected a list")
                read = WriteStat.from_avro if avro else WriteStat.from_json_dict
                stats[str(partition)] = [read(item) for item in items]
        extra_metadata = data.get("extraMetadata")
        operation_type = data.get("operationType")
        if isinstance(operation_type, Mapping):
            operation_type = None  # a writer's serialized Option ({"present": true}): lost
        return {
            "partition_to_write_stats": stats,
            "compacted": bool(data.get("compacted") or False),
            "extra_metadata": {
                str(k): "" if v is None else str(v)
                for k, v in _mapping(extra_metadata or {}, "extraMetadata").items()
            },
            "operation_type": _opt_str(operation_type, "operationType") or "UNKNOWN",
        }

    @classmethod
    def _known_json_keys(cls) -> frozenset[str]:
        return frozenset({"partitionToWriteStats", "compacted", "extraMetadata", "operationType"})

    @classmethod
    def from_json(cls, data: bytes | str) -> Self:
        """Parse Hudi's JSON commit metadata (timeline layout 1, legacy instants of layout 2).

        Empty content gives an empty instance, as Hudi does for an empty commit file.
        """
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        if not text.strip():
            return cls()
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"commit metadata is not valid JSON: {exc}") from exc
        parsed = _mapping(parsed, "commit metadata")
        kwargs = cls._kwargs(parsed, avro=False)
        known = cls._known_json_keys()
        kwargs["extra"] = {
            k: v for k, v in parsed.items() if k not in known and k not in _LEGACY_DERIVED_KEYS
        }
        return cls(**kwargs)

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> Self:
        """Build from a decoded Avro record (see ``avro_codec.decode``), timeline layout 2."""
        return cls(**cls._kwargs(_mapping(record, "commit metadata"), avro=True))

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Read an instant file's content in either form: Avro (layout 2) or JSON (layout 1)."""
        if avro_codec.is_avro(data):
            return cls.from_avro(avro_codec.decode(data, cls.AVRO_SCHEMA))
        return cls.from_json(data)

    # -- writing -------------------------------------------------------------------------------

    def _json_fields(self) -> dict[str, Any]:
        return {
            "partitionToWriteStats": {
                partition: [stat.to_json_dict() for stat in stats]
                for partition, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "operationType": self.operation_type,
        }

    def to_json(self) -> bytes:
        """UTF-8 JSON exactly as Hudi's ``toJsonString`` writes it (Jackson pretty printer)."""
        out = self._json_fields()
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return dumps_jackson(out).encode("utf-8")

    def to_avro(self) -> dict[str, Any]:
        """The Avro record of ``AVRO_SCHEMA``, ready for ``avro_codec.encode``."""
        return {
            "partitionToWriteStats": {
                partition: [stat.to_avro() for stat in stats]
                for partition, stats in self.partition_to_write_stats.items()
            },
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra_metadata),
            "version": 1,
            "operationType": self.operation_type,
        }

    def to_avro_bytes(self) -> bytes:
        """Avro container content of a completed instant file in timeline layout 2."""
        return avro_codec.encode(self.AVRO_SCHEMA, self.to_avro())

    # -- helpers -------------------------------------------------------------------------------

    def add_write_stat(self, partition_path: str, stat: WriteStat) -> None:
        """Append a stat under its partition (``HoodieCommitMetadata.addWriteStat``)."""
        self.partition_to_write_stats.setdefault(partition_path, []).append(stat)

    def iter_write_stats(self) -> Iterator[tuple[str, WriteStat]]:
        """Every (partition path, stat) pair."""
        for partition, stats in self.partition_to_write_stats.items():
            for stat in stats:
                yield partition, stat

    def write_stats(self) -> list[WriteStat]:
        """All stats, every partition."""
        return [stat for _, stat in self.iter_write_stats()]

    def partitions(self) -> list[str]:
        """Partition paths this commit wrote to."""
        return list(self.partition_to_write_stats)

    def file_paths_written(self) -> list[str]:
        """Relative paths of every file written (base files and log files), deduplicated."""
        return list(dict.fromkeys(s.path for s in self.write_stats() if s.path))

    def log_files_written(self) -> list[str]:
        """Relative paths of the log files written (delta commits of MOR tables)."""
        return [path for path in self.file_paths_written() if _is_log_file(path)]

    def file_ids_by_partition(self) -> dict[str, set[str]]:
        """File ids (file groups) touched, per partition path."""
        out: dict[str, set[str]] = {}
        for partition, stat in self.iter_write_stats():
            if stat.file_id:
                out.setdefault(partition, set()).add(stat.file_id)
        return out

    def total_records_written(self) -> int:
        """Sum of ``numWrites``."""
        return sum(s.num_writes for s in self.write_stats())

    def total_bytes_written(self) -> int:
        """Sum of ``totalWriteBytes``."""
        return sum(s.total_write_bytes for s in self.write_stats())

    def total_records_deleted(self) -> int:
        """Sum of ``numDeletes``."""
        return sum(s.num_deletes for s in self.write_stats())

    def total_log_files(self) -> int:
        """Number of distinct log files written by this commit."""
        return len(self.log_files_written())

    def total_log_files_compacted(self) -> int:
        """Sum of ``totalLogFilesCompacted`` (compaction commits)."""
        return sum(s.total_log_files_compacted for s in self.write_stats())

    def total_log_records_compacted(self) -> int:
        """Sum of ``totalLogRecords`` (compaction commits)."""
        return sum(s.total_log_records for s in self.write_stats())

    @property
    def schema(self) -> str | None:
        """The writer's Avro schema (``extraMetadata["schema"]``), if recorded."""
        return self.extra_metadata.get(SCHEMA_KEY) or None


@dataclass
class ReplaceCommitMetadata(CommitMetadata):
    """Metadata of a completed replacecommit (clustering, insert overwrite, delete partition).

    ``partition_to_replace_file_ids`` lists the file groups this commit replaced.
    """

    AVRO_SCHEMA: ClassVar[str] = "HoodieReplaceCommitMetadata"

    partition_to_replace_file_ids: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def _kwargs(cls, data: Mapping[str, Any], avro: bool) -> dict[str, Any]:
        kwargs = super()._kwargs(data, avro)
        raw = data.get("partitionToReplaceFileIds")
        kwargs["partition_to_replace_file_ids"] = {
            str(partition): _str_list(ids, f"partitionToReplaceFileIds[{partition!r}]")
            for partition, ids in _mapping(raw or {}, "partitionToReplaceFileIds").items()
        }
        return kwargs

    @classmethod
    def _known_json_keys(cls) -> frozenset[str]:
        return super()._known_json_keys() | {"partitionToReplaceFileIds"}

    def _json_fields(self) -> dict[str, Any]:
        out = super()._json_fields()
        out["partitionToReplaceFileIds"] = {
            partition: list(ids) for partition, ids in self.partition_to_replace_file_ids.items()
        }
        return out

    def to_avro(self) -> dict[str, Any]:
        out = super().to_avro()
        out["partitionToReplaceFileIds"] = {
            partition: list(ids) for partition, ids in self.partition_to_replace_file_ids.items()
        }
        return out

    def replaced_file_ids(self) -> dict[str, set[str]]:
        """File ids replaced, per partition path."""
        return {
            partition: set(ids) for partition, ids in self.partition_to_replace_file_ids.items()
        }
