"""The `indexing` action's protocol on storage (Hudi's RFC-45 async indexer): the plan and
commit metadata, scheduling, the data table config steps, abort and drop.

An index build is an instant `T` of the data table's timeline: `<T>.indexing.requested`
holds the `HoodieIndexPlan` (one `HoodieIndexPartitionInfo` per metadata partition, built up
to instant `U`); `<T>.indexing.inflight` while it runs; `<T>_<completion>.indexing` holds the
`HoodieIndexCommitMetadata`. The new partitions are listed in
`hoodie.table.metadata.partitions.inflight` once their file groups exist (writers log their
updates to them from then on; readers ignore them) and move to
`hoodie.table.metadata.partitions` when the build has caught up. The metadata table's delta
commits of the build are `T` (base files) and `T + "010"` (catch-up log files).

The files themselves are written by `tms.hudi.metadata.index_build`; `tms.services.index.build`
runs the steps in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.avro import codec
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.index_defs import INDEX_DEFS_PATH_KEY, index_definitions_path
from tms.hudi.metadata.partitions import COLUMN_STATS, FILES, PARTITION_STATS, RECORD_INDEX
from tms.hudi.metadata.reader import METADATA_FOLDER, metadata_storage
from tms.hudi.properties import (
    METADATA_PARTITIONS,
    METADATA_PARTITIONS_INFLIGHT,
    PROPERTIES_PATH,
    TableConfig,
)
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import WRITE_ACTIONS, Action, Instant, State
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline
from tms.hudi.timeline.transitions import new_instant_time, request, transition

__all__ = [
    "CATCH_UP_SUFFIX",
    "INDEXABLE",
    "IndexCommitMetadata",
    "IndexPartitionInfo",
    "IndexPlan",
    "abort_indexing",
    "catch_up_time",
    "complete_indexing",
    "drop_partitions",
    "ensure_schedulable",
    "index_up_to",
    "inflight_partitions",
    "mark_inflight",
    "partition_names",
    "pending_indexing",
    "read_plan",
    "schedule_indexing",
    "schedule_refusals",
]

PLAN_SCHEMA = "HoodieIndexPlan"
COMMIT_SCHEMA = "HoodieIndexCommitMetadata"
LATEST_VERSION = 1
"""`LATEST_INDEX_PLAN_VERSION` and `LATEST_INDEX_COMMIT_METADATA_VERSION`."""
CATCH_UP_SUFFIX = "010"
"""The catch-up delta commit is `T + "010"`: it sorts after `T` and before every instant
requested later, so writers' log blocks of later instants apply after it."""
INDEXABLE = (FILES, COLUMN_STATS, PARTITION_STATS, RECORD_INDEX)
"""Partitions an index build writes; `files` builds the metadata table itself, alone."""
DEFAULT_INDEX_DEFS_PATH = ".hoodie/.index_defs/index.json"
COLUMNS_KEY = "columns"
VERSION_KEY = "indexVersion"
"""`extraMetadata` of a stats partition's plan entry: the columns and index version built, so
writers logging to the partition while it is inflight index the same columns."""


# The plan and the commit metadata ----------------------------------------------------------


@dataclass(frozen=True)
class IndexPartitionInfo:
    """`HoodieIndexPartitionInfo`: one metadata partition and the instant it is indexed up to."""

    partition: str
    up_to: str | None
    extra: Mapping[str, str] | None = None
    version: int = LATEST_VERSION

    def to_avro(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "metadataPartitionPath": self.partition,
            "indexUptoInstant": self.up_to,
            "extraMetadata": dict(self.extra) if self.extra is not None else None,
        }

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> IndexPartitionInfo:
        partition = record.get("metadataPartitionPath")
        if not partition:
            raise ValueError("an index partition info without metadataPartitionPath")
        extra = record.get("extraMetadata")
        return cls(
            str(partition),
            record.get("indexUptoInstant"),
            dict(extra) if extra is not None else None,
            int(record.get("version") or LATEST_VERSION),
        )


@dataclass(frozen=True)
class IndexPlan:
    """`HoodieIndexPlan`, the content of `<T>.indexing.requested`."""

    infos: tuple[IndexPartitionInfo, ...]
    version: int = LATEST_VERSION

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(info.partition for info in self.infos)

    @property
    def up_to(self) -> str:
        """`U`: every partition of one plan is built up to the same instant."""
        times = {info.up_to for info in self.infos}
        if len(times) != 1 or None in times:
            raise ValueError(f"index plan partitions are not built up to one instant: {times}")
        return str(times.pop())

    def extra(self, partition: str) -> Mapping[str, str]:
        for info in self.infos:
            if info.partition == partition:
                return info.extra or {}
        return {}

    def to_bytes(self) -> bytes:
        record = {"version": self.version, "indexPartitionInfos": [i.to_avro() for i in self.infos]}
        return codec.encode(PLAN_SCHEMA, record)

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> IndexPlan:
        infos = tuple(
            IndexPartitionInfo.from_avro(i) for i in record.get("indexPartitionInfos") or []
        )
        if not infos:
            raise ValueError("an index plan without partitions")
        return cls(infos, int(record.get("version") or LATEST_VERSION))


@dataclass(frozen=True)
class IndexCommitMetadata:
    """`HoodieIndexCommitMetadata`, the content of the completed `indexing` instant."""

    infos: tuple[IndexPartitionInfo, ...]
    operation_type: str | None = None
    version: int = LATEST_VERSION

    def to_bytes(self) -> bytes:
        record = {
            "version": self.version,
            "operationType": self.operation_type,
            "indexPartitionInfos": [i.to_avro() for i in self.infos],
        }
        return codec.encode(COMMIT_SCHEMA, record)

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> IndexCommitMetadata:
        infos = tuple(
            IndexPartitionInfo.from_avro(i) for i in record.get("indexPartitionInfos") or []
        )
        return cls(infos, record.get("operationType"), int(record.get("version") or LATEST_VERSION))


def partition_names(partitions: str | Sequence[str]) -> list[str]:
    """Metadata partition names from a request's `partitions` (a list, or comma-separated)."""
    items = partitions.split(",") if isinstance(partitions, str) else list(partitions)
    return [str(p).strip() for p in items if str(p).strip()]


def read_plan(timeline: Timeline, instant: Instant) -> IndexPlan:
    details = timeline.avro_details(instant, State.REQUESTED)
    if details is None:
        raise ValueError(f"indexing {instant.requested_time} has an empty plan")
    return IndexPlan.from_avro(details)


def pending_indexing(timeline: Timeline) -> list[Instant]:
    return timeline.pending((Action.INDEXING,))


def catch_up_time(instant_time: str) -> str:
    return instant_time + CATCH_UP_SUFFIX


# Scheduling ----------------------------------------------------------------------------------


def inflight_partitions(config: TableConfig) -> list[str]:
    return [p.strip() for p in config.get(METADATA_PARTITIONS_INFLIGHT).split(",") if p.strip()]


def index_up_to(timeline: Timeline) -> Instant | None:
    """`U`: the latest completed write before which no write of the timeline is pending, so
    a build as of `U` misses nothing a writer may still complete before it."""
    pending = [
        i.requested_time
        for i in timeline.instants
        if i.is_pending and timeline.origin_action(i) in WRITE_ACTIONS
    ]
    first_pending = min(pending, default=None)
    done = [
        i
        for i in timeline.completed(WRITE_COMMIT_ACTIONS)
        if first_pending is None or i.requested_time < first_pending
    ]
    return done[-1] if done else None


def schedule_refusals(
    storage: Storage, config: TableConfig, timeline: Timeline, partitions: Sequence[str]
) -> list[str]:
    """Why these partitions cannot be indexed now; empty when they can."""
    reasons: list[str] = []
    if not partitions:
        reasons.append("name at least one metadata partition to index")
    built = set(config.metadata_partitions)
    inflight = set(inflight_partitions(config))
    has_folder = storage.exists(f"{METADATA_FOLDER}/{PROPERTIES_PATH}")
    if FILES in partitions:
        if len(partitions) > 1:
            reasons.append("files is built alone: the other partitions are built once it is")
        if FILES not in built and FILES not in inflight and (built or has_folder):
            reasons.append(
                f"{METADATA_FOLDER} exists without a built files partition; drop what it "
                "holds first"
            )
    elif FILES not in built or not has_folder:
        reasons.append(
            "the table has no metadata table with a built files partition: build files first"
        )
    for partition in partitions:
        if partition not in INDEXABLE:
            reasons.append(f"{partition!r} is not a metadata partition we build; use {INDEXABLE}")
        elif partition in built:
            reasons.append(f"metadata partition {partition} is already built")
        elif partition in inflight:
            reasons.append(f"metadata partition {partition} is already being built")
    for instant in pending_indexing(timeline):
        reasons.append(f"indexing {instant.requested_time} is pending; one build at a time")
    if index_up_to(timeline) is None:
        reasons.append("the table has no completed write to index")
    return reasons


def _refuse(verb: str, storage: Storage, names: Sequence[str], reasons: list[str]) -> None:
    if reasons:
        what = ", ".join(names) or "metadata partitions"
        raise UnsupportedTableError(
            f"cannot {verb} {what} on {storage.base_path}: " + "; ".join(reasons)
        )


def ensure_schedulable(
    storage: Storage, config: TableConfig, timeline: Timeline, partitions: Sequence[str]
) -> None:
    """`UnsupportedTableError` naming every reason `schedule_refusals` gives."""
    _refuse("index", storage, partitions, schedule_refusals(storage, config, timeline, partitions))


def schedule_indexing(
    storage: Storage,
    partitions: Sequence[str],
    extra: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """Write `<T>.indexing.requested` for `partitions` (in `INDEXABLE` order) and return `T`.
    `extra`: a plan entry's `extraMetadata`, by partition. Refusals raise
    `UnsupportedTableError` before anything is written."""
    config = TableConfig.load(storage)
    timeline = Timeline.load(storage, config)
    names = list(dict.fromkeys(partitions))
    ensure_schedulable(storage, config, timeline, names)
    up_to = index_up_to(timeline)
    assert up_to is not None  # refused above
    infos = tuple(
        IndexPartitionInfo(p, up_to.requested_time, (extra or {}).get(p))
        for p in INDEXABLE
        if p in names
    )
    md_storage = metadata_storage(storage)
    metadata_instants: Sequence[Instant] = ()
    if md_storage.exists(PROPERTIES_PATH):
        metadata_instants = Timeline.load(md_storage, TableConfig.load(md_storage)).instants
    instant_time = new_instant_time([*timeline.instants, *metadata_instants])
    request(storage, config, instant_time, Action.INDEXING, IndexPlan(infos).to_bytes())
    return instant_time


# Table config steps --------------------------------------------------------------------------


def _save_partitions(
    storage: Storage, built: Iterable[str], inflight: Iterable[str]
) -> TableConfig:
    """Re-read `hoodie.properties` and save it with these partition lists (sorted, as Hudi's
    `setMetadataPartitionState` writes them)."""
    props = dict(TableConfig.load(storage).props)
    props[METADATA_PARTITIONS] = ",".join(sorted(set(built)))
    props[METADATA_PARTITIONS_INFLIGHT] = ",".join(sorted(set(inflight)))
    config = TableConfig(props)
    config.save(storage)
    return config


def mark_inflight(storage: Storage, partitions: Sequence[str]) -> TableConfig:
    """List the new partitions as inflight: from now on writers log their updates to them."""
    config = TableConfig.load(storage)
    return _save_partitions(
        storage, config.metadata_partitions, [*inflight_partitions(config), *partitions]
    )


def write_index_definitions(
    storage: Storage, entries: Mapping[str, Mapping[str, Any]], dropped: Iterable[str] = ()
) -> None:
    """Add (or replace) `entries` and remove `dropped` in the table's `index.json`, naming the
    file in `hoodie.properties` when it had none."""
    config = TableConfig.load(storage)
    path = index_definitions_path(config)
    document: dict[str, Any] = {"indexDefinitions": {}}
    if path is not None and storage.exists(path):
        document = json.loads(storage.read_bytes(path))
    elif not entries:
        return
    definitions = document.setdefault("indexDefinitions", {})
    for name in dropped:
        definitions.pop(name, None)
    definitions.update({name: dict(entry) for name, entry in entries.items()})
    target = path or DEFAULT_INDEX_DEFS_PATH
    storage.write_bytes(target, json.dumps(document, indent=2).encode("utf-8"))
    if path is None:
        props = dict(config.props)
        props[INDEX_DEFS_PATH_KEY] = target
        TableConfig(props).save(storage)


def complete_indexing(
    storage: Storage,
    instant: Instant,
    plan: IndexPlan,
    caught_up_to: str,
    definitions: Mapping[str, Mapping[str, Any]],
) -> Instant:
    """Index definitions, then the partitions listed as built, then the completed instant
    with the commit metadata (each partition indexed up to `caught_up_to`)."""
    write_index_definitions(storage, definitions)
    config = TableConfig.load(storage)
    built = [*config.metadata_partitions, *plan.partitions]
    inflight = [p for p in inflight_partitions(config) if p not in plan.partitions]
    config = _save_partitions(storage, built, inflight)
    metadata = IndexCommitMetadata(
        tuple(IndexPartitionInfo(i.partition, caught_up_to, i.extra) for i in plan.infos)
    )
    return transition(storage, config, instant, State.COMPLETED, metadata.to_bytes())


def abort_indexing(
    storage: Storage, instant_time: str, partitions: Sequence[str], *, keep_plan: bool = False
) -> None:
    """Undo a build that did not complete: the partitions leave `.inflight`, their folders
    and the metadata table's instants `T` and `T + "010"` go (the whole metadata table when
    the build made it: `files`), and so does the `indexing` instant (only its inflight file
    with `keep_plan`, to run the plan again)."""
    config = TableConfig.load(storage)
    inflight = inflight_partitions(config)
    if any(p in inflight for p in partitions):
        config = _save_partitions(
            storage, config.metadata_partitions, [p for p in inflight if p not in partitions]
        )
    md_storage = metadata_storage(storage)
    built = set(config.metadata_partitions)
    if FILES in partitions and FILES not in built:
        # the build created the metadata table: it goes whole, with the catch-up's delta
        # commits (named by the instants they applied)
        storage.delete_dir(METADATA_FOLDER)
    for partition in partitions:
        if partition not in built:
            md_storage.delete_dir(partition)
    if md_storage.exists(PROPERTIES_PATH):
        folder = TableConfig.load(md_storage).timeline_path
        for time in (instant_time, catch_up_time(instant_time)):
            # by name: the catch-up time has more digits than an instant time
            for entry in md_storage.list_dir(folder):
                if not entry.is_dir and entry.name.startswith((f"{time}.", f"{time}_")):
                    md_storage.delete(f"{folder}/{entry.name}")
            md_storage.delete_dir(f".hoodie/.temp/{time}")
    timeline = Timeline.load(storage, config)
    paths = timeline.files.get((instant_time, Action.INDEXING), {})
    states = (State.INFLIGHT,) if keep_plan else (State.INFLIGHT, State.REQUESTED)
    for state in states:
        if state in paths:
            storage.delete(paths[state])


# Drop ----------------------------------------------------------------------------------------


def drop_refusals(
    storage: Storage, config: TableConfig, timeline: Timeline, partitions: Sequence[str]
) -> list[str]:
    built = set(config.metadata_partitions)
    reasons: list[str] = []
    if not partitions:
        reasons.append("name at least one metadata partition to drop")
    for partition in partitions:
        if partition not in built:
            reasons.append(f"metadata partition {partition} is not built on this table")
    if (
        PARTITION_STATS in built
        and COLUMN_STATS in partitions
        and PARTITION_STATS not in partitions
    ):
        reasons.append("partition_stats needs column_stats: drop partition_stats with it")
    for instant in pending_indexing(timeline):
        reasons.append(f"indexing {instant.requested_time} is pending; drop after it ends")
    building = inflight_partitions(config)
    if building:
        reasons.append(f"metadata partitions {', '.join(building)} are being built")
    md_storage = metadata_storage(storage)
    if md_storage.exists(PROPERTIES_PATH):
        md_timeline = Timeline.load(md_storage, TableConfig.load(md_storage))
        for instant in md_timeline.pending_compactions():
            reasons.append(
                f"the metadata table's compaction {instant.requested_time} is pending; its "
                "plan may name the partition's file groups"
            )
    return reasons


def drop_partitions(storage: Storage, partitions: Sequence[str]) -> list[str]:
    """Drop built metadata partitions: readers stop using them (config), their index
    definitions go, then their folders. Dropping `files` drops the whole metadata table.
    Returns the partitions dropped. No timeline instant is written."""
    names = list(dict.fromkeys(partitions))
    config = TableConfig.load(storage)
    timeline = Timeline.load(storage, config)
    _refuse("drop", storage, names, drop_refusals(storage, config, timeline, names))
    dropped = list(config.metadata_partitions) if FILES in names else names
    remaining = [p for p in config.metadata_partitions if p not in dropped]
    _save_partitions(storage, remaining, inflight_partitions(config))
    write_index_definitions(storage, {}, dropped)
    if FILES in names:
        storage.delete_dir(METADATA_FOLDER)
    else:
        md_storage = metadata_storage(storage)
        for partition in dropped:
            md_storage.delete_dir(partition)
    return dropped


@dataclass(frozen=True)
class InflightStats:
    """The columns a stats partition being built covers, from its plan entry."""

    columns: tuple[str, ...] = ()
    version: str = "V1"
    found: bool = field(default=False)


def inflight_stats_columns(timeline: Timeline, partition: str = COLUMN_STATS) -> InflightStats:
    """Columns and index version of a stats partition a pending `indexing` plan builds, so a
    writer logging to it while it is inflight indexes what the build indexes."""
    for instant in pending_indexing(timeline):
        try:
            plan = read_plan(timeline, instant)
        except ValueError:
            continue
        extra = plan.extra(partition)
        if partition in plan.partitions and extra.get(COLUMNS_KEY):
            columns = tuple(c for c in extra[COLUMNS_KEY].split(",") if c)
            return InflightStats(columns, extra.get(VERSION_KEY, "V1"), True)
    return InflightStats()
