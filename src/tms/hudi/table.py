"""A Hudi table on storage: its configuration, timeline and file-system view."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tms.hudi.errors import (
    TableNotFoundError,
    UnsupportedTableError,
)
from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.locks import LockSpec
from tms.hudi.merge_config import merge_refusals
from tms.hudi.metadata.index_defs import read_index_definitions
from tms.hudi.metadata.partitions import (
    COLUMN_STATS,
    FILES,
    PARTITION_STATS,
    RECORD_INDEX,
    MetadataPartition,
    PartitionKind,
)
from tms.hudi.metadata.reader import METADATA_FOLDER, metadata_storage
from tms.hudi.metadata.schema import layout_mismatch
from tms.hudi.properties import (
    BOOTSTRAP_BASE_PATH,
    METADATA_PARTITIONS_INFLIGHT,
    PROPERTIES_PATH,
    TIMELINE_PATH,
    TableConfig,
)
from tms.hudi.record_keys.table_keys import timestamp_partition_fields
from tms.hudi.storage import Storage
from tms.hudi.table_paths import check_relative
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.timeline import Timeline

__all__ = ["HudiTable"]

READABLE_TABLE_VERSIONS = (6, 7, 8, 9)
"""Versions read, and serviced unless `unsupported_features` names a reason (on 8 and 9,
timeline layout 2, a metadata table is the usual one)."""
BOOTSTRAP_INDEX_FOLDER = ".hoodie/.aux/.bootstrap"
KEPT_METADATA_PARTITIONS = (
    PartitionKind.FILES,
    PartitionKind.COLUMN_STATS,
    PartitionKind.PARTITION_STATS,
    PartitionKind.RECORD_INDEX,
    PartitionKind.SECONDARY_INDEX,
)
"""Metadata partitions the services keep true; bloom filters and expression indexes are not."""


DEFAULT_LOCK = LockSpec()
"""Hudi's file-system lock, as a writer configured with it takes it by default."""


@dataclass(frozen=True)
class HudiTable:
    storage: Storage
    config: TableConfig
    lock: LockSpec = DEFAULT_LOCK
    """How the table's writers lock it (`hoodie.write.lock.*`, not kept in the table)."""

    @classmethod
    def open(
        cls,
        base_path: str,
        storage_options: Mapping[str, Any] | None = None,
        lock: LockSpec | None = None,
    ) -> HudiTable:
        """The table at `base_path`; `storage_options` (credentials, endpoint) go to fsspec,
        `lock` says how its writers lock it (Hudi's file-system lock by default)."""
        try:  # one GET: no existence check first (a HEAD on an object store)
            storage = Storage(base_path, storage_options=storage_options)
            config = TableConfig.load(storage)
        except FileNotFoundError:
            raise TableNotFoundError(
                f"no Hudi table at {base_path}: {PROPERTIES_PATH} is missing"
            ) from None
        except (ImportError, ValueError, OSError) as exc:  # unknown scheme, no access…
            raise TableNotFoundError(f"cannot read a Hudi table at {base_path}: {exc}") from exc
        try:
            version = config.table_version
        except ValueError as exc:
            raise UnsupportedTableError(
                f"hoodie.table.version={config.get('hoodie.table.version')!r} is not a version"
            ) from exc
        if version not in READABLE_TABLE_VERSIONS:
            raise UnsupportedTableError(
                f"table version {version} is not supported; "
                f"readable versions are {', '.join(map(str, READABLE_TABLE_VERSIONS))}"
            )
        if config.get(TIMELINE_PATH):
            # instants are read and written there: it must stay inside `.hoodie/`
            check_relative(
                config.get(TIMELINE_PATH), "hoodie.properties", TIMELINE_PATH, data=False
            )
        return cls(storage, config, lock or DEFAULT_LOCK)

    @property
    def base_path(self) -> str:
        return self.storage.base_path

    @property
    def name(self) -> str:
        return self.config.table_name

    def timeline(self) -> Timeline:
        return Timeline.load(self.storage, self.config)

    def file_system_view(self, timeline: Timeline | None = None) -> FileSystemView:
        return FileSystemView.build(self.storage, timeline or self.timeline())

    def unsupported_features(self, timeline: Timeline | None = None) -> list[str]:
        """Why our table services must not touch this table; empty when they may."""
        config = self.config
        reasons: list[str] = []
        timeline = timeline or self.timeline()
        reasons += self._metadata_table_refusals(timeline)
        if config.get(BOOTSTRAP_BASE_PATH) or self._has_bootstrap_index():
            reasons.append("the table is bootstrapped from another table; bootstrap is not handled")
        if config.base_file_format != "PARQUET":
            reasons.append(f"base file format {config.base_file_format} is not handled")
        reasons += merge_refusals(config)
        if any(timeline.origin_action(i) is Action.LOG_COMPACTION for i in timeline.instants):
            reasons.append(
                "the timeline has log compaction instants; log compaction is not handled"
            )
        return reasons

    def _metadata_table_refusals(self, timeline: Timeline) -> list[str]:
        """What keeps the services from keeping the metadata table true (empty without one):
        they keep `files`, `column_stats`, `partition_stats`, `record_index` (global) and
        secondary indexes, on tables of version 8 and 9 whose metadata table we can write."""
        config = self.config
        built = config.metadata_partitions
        inflight = [p.strip() for p in config.get(METADATA_PARTITIONS_INFLIGHT).split(",")]
        inflight = [p for p in inflight if p]
        if not built and not inflight:
            return []
        reasons: list[str] = []
        if inflight:
            builds = self._indexing_instants(timeline, inflight)
            by = f"by indexing {', '.join(builds)}" if builds else "by another writer"
            reasons.append(
                f"metadata table partitions {', '.join(inflight)} are being built {by} "
                f"({METADATA_PARTITIONS_INFLIGHT}); table services wait until the build "
                "completes or is aborted"
            )
        for partition in built:
            try:
                kind = MetadataPartition(partition).kind
            except ValueError:
                kind = None
            if kind not in KEPT_METADATA_PARTITIONS:
                reasons.append(f"metadata table partition {partition} is not kept by the services")
        if PARTITION_STATS in built and COLUMN_STATS not in built:
            reasons.append("partition_stats without column_stats is not kept by the services")
        stamped = timestamp_partition_fields(config) if PARTITION_STATS in built else []
        if stamped:
            reasons.append(
                f"partition_stats over partition fields made by a timestamp key generator "
                f"({', '.join(stamped)}) is not kept by the services: the files' stats are of "
                "the source field's type, the partition's of the formatted path"
            )
        if built and FILES not in built:
            reasons.append("the metadata table has no files partition")
        if built and not self.storage.exists(f"{METADATA_FOLDER}/{PROPERTIES_PATH}"):
            reasons.append(f"the metadata table is listed but {METADATA_FOLDER} is missing")
            return reasons
        try:
            definitions = read_index_definitions(self.storage, config)
            metadata_config = TableConfig.load(metadata_storage(self.storage))
        except UnsupportedTableError as err:
            return [*reasons, f"metadata table: {err}"]
        record_index = definitions.get(RECORD_INDEX)
        if record_index is not None and record_index.is_partitioned:
            reasons.append("a partitioned record index is not kept by the services")
        mismatch = layout_mismatch(config.table_version, metadata_config.timeline_layout_version)
        if built and mismatch:
            reasons.append(mismatch)
        return reasons

    @staticmethod
    def _indexing_instants(timeline: Timeline, partitions: list[str]) -> list[str]:
        """Pending `indexing` instants whose plan builds one of `partitions`."""
        found = []
        for instant in timeline.pending((Action.INDEXING,)):
            try:
                plan = timeline.avro_details(instant, State.REQUESTED) or {}
            except (OSError, ValueError):
                continue
            infos = plan.get("indexPartitionInfos") or []
            if any(info.get("metadataPartitionPath") in partitions for info in infos):
                found.append(instant.requested_time)
        return found

    def _has_bootstrap_index(self) -> bool:
        """Hudi creates the bootstrap index folders in every table; only files count."""
        return any(True for _ in self.storage.walk_files(BOOTSTRAP_INDEX_FOLDER))

    def ensure_supported(self, timeline: Timeline | None = None) -> None:
        """Refuse, before anything is written, a table our services would damage."""
        reasons = self.unsupported_features(timeline)
        if reasons:
            raise UnsupportedTableError(
                f"cannot run table services on {self.base_path}: " + "; ".join(reasons)
            )
