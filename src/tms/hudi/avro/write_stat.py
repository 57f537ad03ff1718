"""Write stats: what one write task wrote to one file of a file group (``HoodieWriteStat``).

Commit metadata carries one write stat per file written, and the services read them back to
find a commit's base files and log files. Hudi (Jackson, timeline layout 1) writes a stat as JSON
with every field of ``HoodieWriteStat`` in Java declaration order, nulls included; timeline
layout 2 stores the Avro record ``HoodieWriteStat``. ``WriteStat`` reads and writes both in
Hudi's exact shape, so Hudi and hudi-rs read what we write, and keeps fields it does not know in
``extra`` so a read-modify-write loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from tms.hudi.avro.json_fields import (
    as_long,
    as_mapping,
    as_optional_long,
    as_optional_str,
    as_str_list,
)

__all__ = ["NULL_COMMIT", "RuntimeStats", "WriteStat"]

NULL_COMMIT = "null"
"""``prevCommit`` Hudi writes for a file group created by the commit (an insert)."""

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
# Nullable scalar fields (Java objects): null is written as null.
_OPTIONAL_ATTRS = {
    "fileId": "file_id",
    "path": "path",
    "prevCommit": "prev_commit",
    "tempPath": "temp_path",
    "partitionPath": "partition_path",
    "minEventTime": "min_event_time",
    "maxEventTime": "max_event_time",
}

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
            total_scan_time=as_long(data.get("totalScanTime"), "totalScanTime"),
            total_upsert_time=as_long(data.get("totalUpsertTime"), "totalUpsertTime"),
            total_create_time=as_long(data.get("totalCreateTime"), "totalCreateTime"),
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

    @classmethod
    def _common(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            attr: as_long(data.get(key), key) for attr, key in _COUNTERS if key in data
        }
        kwargs["file_id"] = as_optional_str(data.get("fileId"), "fileId")
        kwargs["path"] = as_optional_str(data.get("path"), "path")
        kwargs["prev_commit"] = as_optional_str(data.get("prevCommit"), "prevCommit")
        kwargs["temp_path"] = as_optional_str(data.get("tempPath"), "tempPath")
        kwargs["partition_path"] = as_optional_str(data.get("partitionPath"), "partitionPath")
        kwargs["min_event_time"] = as_optional_long(data.get("minEventTime"), "minEventTime")
        kwargs["max_event_time"] = as_optional_long(data.get("maxEventTime"), "maxEventTime")
        cdc = data.get("cdcStats")
        if cdc is not None:
            kwargs["cdc_stats"] = {
                str(k): as_long(v, "cdcStats") for k, v in as_mapping(cdc, "cdcStats").items()
            }
        runtime = data.get("runtimeStats")
        if runtime is not None:
            kwargs["runtime_stats"] = RuntimeStats.from_dict(as_mapping(runtime, "runtimeStats"))
        kwargs["log_version"] = as_optional_long(data.get("logVersion"), "logVersion")
        kwargs["log_offset"] = as_optional_long(data.get("logOffset"), "logOffset")
        kwargs["base_file"] = as_optional_str(data.get("baseFile"), "baseFile")
        log_files = data.get("logFiles")
        if log_files is not None:
            kwargs["log_files"] = as_str_list(log_files, "logFiles")
        return kwargs

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read one element of ``partitionToWriteStats`` in Hudi's JSON form."""
        data = as_mapping(data, "write stat")
        kwargs = cls._common(data)
        kwargs["extra"] = {k: v for k, v in data.items() if k not in _JSON_KNOWN_KEYS}
        return cls(**kwargs)

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> Self:
        """Read a decoded ``HoodieWriteStat`` Avro record (timeline layout 2)."""
        record = as_mapping(record, "write stat")
        kwargs = cls._common(record)
        if record.get("totalLogFilesCompacted") is None and record.get("totalLogFiles") is not None:
            kwargs["total_log_files_compacted"] = as_long(record["totalLogFiles"], "totalLogFiles")
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
