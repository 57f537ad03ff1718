"""What keeps tms's own table services off a table, decided before anything is written.

A table the services would damage is refused, saying why: one bootstrapped from another
table, a base file format other than Parquet, a merge mode or payload they do not apply, log
compaction on the timeline, or a metadata table they cannot keep true (partitions being built,
partitions they do not keep, a partitioned record index, a layout they do not write). Apache
Hudi's own code (`services.apache_hudi`) has refusals of its own; the executors' choice
(`services.registry.TableService.decide`) weighs both.

Those are a data table's rules, the default for a table as the format layer opens it
(`HudiTable`, which carries no service policy). A table the services open in a role of their
own (`services.metadata.table.MetadataTable`, for the metadata table's clean) answers its own
refusals (`RefusingTable`), so a new kind of table brings its rules with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tms.hudi.errors import UnsupportedTableError
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
    TableConfig,
)
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.timeline import Timeline

__all__ = [
    "KEPT_METADATA_PARTITIONS",
    "DataTableRefusals",
    "RefusingTable",
    "ensure_supported",
    "refusals_beside_log_compactions",
    "refusals_of",
    "unsupported_features",
]

BOOTSTRAP_INDEX_FOLDER = ".hoodie/.aux/.bootstrap"
KEPT_METADATA_PARTITIONS = (
    PartitionKind.FILES,
    PartitionKind.COLUMN_STATS,
    PartitionKind.PARTITION_STATS,
    PartitionKind.RECORD_INDEX,
    PartitionKind.SECONDARY_INDEX,
    PartitionKind.BLOOM_FILTERS,
)
"""Metadata partitions the services keep true; expression indexes are not."""


@runtime_checkable
class RefusingTable(Protocol):
    """A table that says itself what keeps the services off it, and what a refusal calls
    the work refused; a table without these gets the data table's rules."""

    def refusals(self) -> list[str]:
        """Why the services must not touch it; empty when they may."""
        ...

    def refused_work(self) -> str:
        """What a refusal says cannot be done, e.g. `clean the metadata table /x`."""
        ...


@dataclass(frozen=True)
class DataTableRefusals:
    """A data table's rules (`RefusingTable`'s answers for a table of the format layer)."""

    table: HudiTable
    timeline: Timeline | None = None

    def refusals(self) -> list[str]:
        """Read against the caller's timeline when it has one: one listing, not two."""
        return _data_table_refusals(self.table, self.timeline or self.table.timeline())

    def refused_work(self) -> str:
        """Every service is refused alike on a data table."""
        return f"run table services on {self.table.base_path}"


def refusals_of(table: HudiTable, timeline: Timeline | None = None) -> RefusingTable:
    """Who answers for `table`: itself when it answers its own refusals, else the data
    table's rules (read against `timeline`, or its own)."""
    return table if isinstance(table, RefusingTable) else DataTableRefusals(table, timeline)


def ensure_supported(table: HudiTable, timeline: Timeline | None = None) -> None:
    """Refuse, before anything is written, a table our services would damage."""
    rules = refusals_of(table, timeline)
    reasons = rules.refusals()
    if reasons:
        raise UnsupportedTableError(f"cannot {rules.refused_work()}: " + "; ".join(reasons))


def unsupported_features(table: HudiTable, timeline: Timeline | None = None) -> list[str]:
    """Why our table services must not touch this table; empty when they may. A table that
    answers its own refusals (`RefusingTable`) answers by its own rule."""
    return refusals_of(table, timeline).refusals()


def _data_table_refusals(table: HudiTable, timeline: Timeline) -> list[str]:
    """The data table's rules: its metadata table, bootstrap, base files, merging, log
    compaction."""
    reasons = refusals_beside_log_compactions(table, timeline)
    pending = [i.requested_time for i in timeline.pending((Action.LOG_COMPACTION,))]
    if pending:
        reasons.append(
            f"log compaction {', '.join(pending)} is pending; the services wait until it "
            "completes (the logcompaction service runs it; completed log compactions are read "
            "as Hudi reads them)"
        )
    return reasons


def refusals_beside_log_compactions(table: HudiTable, timeline: Timeline) -> list[str]:
    """The data table's rules but its pending log compactions: what keeps tms's own log
    compaction executor off a table (the plan it runs is one of them, and the planners leave
    the file groups of the others out of each plan)."""
    config = table.config
    reasons = metadata_table_refusals(table, timeline)
    if config.get(BOOTSTRAP_BASE_PATH) or _has_bootstrap_index(table):
        reasons.append("the table is bootstrapped from another table; bootstrap is not handled")
    if config.base_file_format != "PARQUET":
        reasons.append(f"base file format {config.base_file_format} is not handled")
    reasons += merge_refusals(config)
    return reasons


def metadata_table_refusals(table: HudiTable, timeline: Timeline) -> list[str]:
    """What keeps the services from keeping the metadata table true (empty without one):
    they keep `files`, `column_stats`, `partition_stats`, `record_index` (global) and
    secondary indexes, on tables of version 8 and 9 whose metadata table we can write."""
    built = table.config.metadata_partitions
    inflight = _inflight_partitions(table.config)
    if not built and not inflight:
        return []
    reasons = _builds_in_progress(timeline, inflight) + _partitions_not_kept(table.config)
    if built and not table.storage.exists(f"{METADATA_FOLDER}/{PROPERTIES_PATH}"):
        return [*reasons, f"the metadata table is listed but {METADATA_FOLDER} is missing"]
    return reasons + _metadata_table_layout(table)


def _inflight_partitions(config: TableConfig) -> list[str]:
    return [p.strip() for p in config.get(METADATA_PARTITIONS_INFLIGHT).split(",") if p.strip()]


def _builds_in_progress(timeline: Timeline, inflight: list[str]) -> list[str]:
    """Partitions being built: the services wait until the build completes or is aborted."""
    if not inflight:
        return []
    builds = _indexing_instants(timeline, inflight)
    by = f"by indexing {', '.join(builds)}" if builds else "by another writer"
    return [
        f"metadata table partitions {', '.join(inflight)} are being built {by} "
        f"({METADATA_PARTITIONS_INFLIGHT}); table services wait until the build "
        "completes or is aborted"
    ]


def _partitions_not_kept(config: TableConfig) -> list[str]:
    """Built partitions the services would leave untrue."""
    built = config.metadata_partitions
    reasons = [
        f"metadata table partition {partition} is not kept by the services"
        for partition in built
        if _kind(partition) not in KEPT_METADATA_PARTITIONS
    ]
    if PARTITION_STATS in built and COLUMN_STATS not in built:
        reasons.append("partition_stats without column_stats is not kept by the services")
    if built and FILES not in built:
        reasons.append("the metadata table has no files partition")
    return reasons


def _kind(partition: str) -> PartitionKind | None:
    try:
        return MetadataPartition(partition).kind
    except ValueError:
        return None


def _metadata_table_layout(table: HudiTable) -> list[str]:
    """What the metadata table's own definitions and layout rule out."""
    config = table.config
    try:
        definitions = read_index_definitions(table.storage, config)
        metadata_config = TableConfig.load(metadata_storage(table.storage))
    except UnsupportedTableError as err:
        return [f"metadata table: {err}"]
    reasons = []
    record_index = definitions.get(RECORD_INDEX)
    if record_index is not None and record_index.is_partitioned:
        reasons.append("a partitioned record index is not kept by the services")
    mismatch = layout_mismatch(config.table_version, metadata_config.timeline_layout_version)
    if config.metadata_partitions and mismatch:
        reasons.append(mismatch)
    return reasons


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


def _has_bootstrap_index(table: HudiTable) -> bool:
    """Hudi creates the bootstrap index folders in every table; only files count."""
    return any(True for _ in table.storage.walk_files(BOOTSTRAP_INDEX_FOLDER))
