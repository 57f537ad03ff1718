"""Commit metadata of Hudi's timeline: the write stats, extra metadata and replaced file groups
of a completed commit, deltacommit, compaction or replacecommit.

Layout 1 (table version <= 7) stores commit / deltacommit / replacecommit metadata as JSON that
Hudi's Jackson mapper writes from ``HoodieCommitMetadata`` (field visibility, pretty printed);
layout 2 (table version >= 8) stores the Avro records ``HoodieCommitMetadata`` /
``HoodieReplaceCommitMetadata``. These models read both and write both, in Hudi's exact JSON
shape (camelCase keys in Java field order, nulls written) so Hudi and hudi-rs read what we write.
Unknown top-level fields are kept in ``extra`` and written back; the per-file write stats are
``tms.hudi.avro.write_stat.WriteStat``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.jackson import dumps_jackson
from tms.hudi.avro.json_fields import as_mapping, as_optional_str, as_str_list
from tms.hudi.avro.write_stat import WriteStat

__all__ = ["CommitMetadata", "ReplaceCommitMetadata"]

SCHEMA_KEY = "schema"
"""Key of the writer's Avro schema in ``extraMetadata``."""

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


def _is_log_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith(".") and ".log." in name


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
            for partition, items in as_mapping(raw_stats, "partitionToWriteStats").items():
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
                for k, v in as_mapping(extra_metadata or {}, "extraMetadata").items()
            },
            "operation_type": as_optional_str(operation_type, "operationType") or "UNKNOWN",
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
        parsed = as_mapping(parsed, "commit metadata")
        kwargs = cls._kwargs(parsed, avro=False)
        known = cls._known_json_keys()
        kwargs["extra"] = {
            k: v for k, v in parsed.items() if k not in known and k not in _LEGACY_DERIVED_KEYS
        }
        return cls(**kwargs)

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> Self:
        """Build from a decoded Avro record (see ``avro_codec.decode``), timeline layout 2."""
        return cls(**cls._kwargs(as_mapping(record, "commit metadata"), avro=True))

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
            str(partition): as_str_list(ids, f"partitionToReplaceFileIds[{partition!r}]")
            for partition, ids in as_mapping(raw or {}, "partitionToReplaceFileIds").items()
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
