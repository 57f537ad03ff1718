"""Clustering plans: small file groups of a partition bin-packed into groups that will each be
rewritten as fewer, larger file groups.

Scheduling writes `<ts>.replacecommit.requested` holding Hudi's clustering plan (input groups
of file slices, as `SparkSizeBasedClusteringPlanStrategy` builds them). Execution lives in
`tms.services.clustering.execute`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.schema import arrow_schema_from_avro
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.markers import (
    list_markers,
)
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.meta_fields import META_FIELDS
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.cancel_requests import with_cancellable
from tms.hudi.timeline.instant import Action
from tms.hudi.timeline.layout import TimelineLayout
from tms.hudi.timeline.timeline import CLUSTER_OPERATION, Timeline
from tms.hudi.timeline.transitions import plan_instant_time, request
from tms.services.table_refusals import ensure_supported

if TYPE_CHECKING:
    pass

MIB = 1024 * 1024
DEFAULT_TARGET_FILE_SIZE = 128 * MIB
DEFAULT_SMALL_FILE_LIMIT = 100 * MIB
HUDI_TARGET_FILE_SIZE = 1024 * MIB
"""Hudi's `hoodie.clustering.plan.strategy.target.file.max.bytes`, for plans Hudi scheduled."""
EXECUTION_STRATEGY = (
    "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
)
SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"
TARGET_FILE_SIZE_PARAM = "hoodie.clustering.plan.strategy.target.file.max.bytes"
PLAN_VERSION = 1
FALLBACK_BYTES_PER_ROW = 64.0


# Scheduling -----------------------------------------------------------------------------------


def schedule_clustering(
    table: HudiTable,
    *,
    target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
    small_file_limit: int = DEFAULT_SMALL_FILE_LIMIT,
    sort_columns: Sequence[str] = (),
    max_bytes_per_group: int | None = None,
    instant_time: str | None = None,
    cancellable: bool = True,
) -> str | None:
    """Plan clustering of each partition's small file groups; returns the instant, or None
    when no partition has two or more small file groups that would merge into fewer. The
    plan is `cancellable` by default (RFC-79: a writer updating its file groups may cancel
    it rather than fail).

    File groups in a pending compaction or clustering, or being written by an inflight
    commit, are left out: rewriting them would lose what those instants add.
    """
    group_limit = _group_limit(target_file_size, small_file_limit, max_bytes_per_group)
    timeline = table.timeline()
    ensure_supported(table, timeline)
    view = table.file_system_view(timeline)
    columns = [c.strip() for c in sort_columns if c.strip()]
    _check_sort_columns(timeline, columns)
    busy = (
        view.pending_compaction_file_ids()
        | view.pending_clustering_file_ids()
        | _file_groups_being_written(table, timeline)
    )
    groups: list[dict[str, Any]] = []
    for partition in view.partitions:
        candidates = [
            s
            for s in view.latest_file_slices(partition)
            if (s.partition_path, s.file_id) not in busy and s.total_size < small_file_limit
        ]
        groups += _partition_groups(table.storage, candidates, group_limit, target_file_size)
    if not groups:
        return None
    instant = plan_instant_time(timeline.instants, instant_time)
    requested = _requested_replace(groups, target_file_size, columns, cancellable)
    content = avro_codec.encode("HoodieRequestedReplaceMetadata", requested)
    action = TimelineLayout.of(table.config).clustering_action
    request(table.storage, table.config, instant, action, content)
    return instant


def _group_limit(
    target_file_size: int, small_file_limit: int, max_bytes_per_group: int | None
) -> int:
    """The most bytes of slices one clustering group takes (the target file size unless
    `max_bytes_per_group` says otherwise); sizes that are not positive are refused."""
    if target_file_size <= 0 or small_file_limit <= 0:
        raise ValueError("target_file_size and small_file_limit must be positive")
    group_limit = max_bytes_per_group or target_file_size
    if group_limit <= 0:
        raise ValueError("max_bytes_per_group must be positive")
    return group_limit


def _partition_groups(
    storage: Storage, candidates: Sequence[FileSlice], group_limit: int, target_file_size: int
) -> list[dict[str, Any]]:
    """The clustering groups of one partition's small slices: those bins that would come
    out as fewer file groups than go in."""
    groups: list[dict[str, Any]] = []
    for members in _bin_pack(candidates, group_limit):
        outputs = max(1, math.ceil(sum(s.total_size for s in members) / target_file_size))
        if outputs < len(members):  # otherwise the file count would not drop
            groups.append(_clustering_group(storage, members, outputs, target_file_size))
    return groups


def _requested_replace(
    groups: list[dict[str, Any]],
    target_file_size: int,
    columns: Sequence[str],
    cancellable: bool,
) -> dict[str, Any]:
    """The `HoodieRequestedReplaceMetadata` record of a clustering plan over `groups`, its
    strategy parameters as Hudi's execution strategy reads them."""
    params = {TARGET_FILE_SIZE_PARAM: str(target_file_size)}
    if columns:
        params[SORT_COLUMNS_PARAM] = ",".join(columns)
    return {
        "operationType": CLUSTER_OPERATION,
        "clusteringPlan": {
            "inputGroups": groups,
            "strategy": {
                "strategyClassName": EXECUTION_STRATEGY,
                "strategyParams": params,
                "version": PLAN_VERSION,
            },
            "extraMetadata": with_cancellable(None, cancellable),
            "version": PLAN_VERSION,
            "preserveHoodieMetadata": True,
            "missingSchedulePartitions": None,
        },
        "extraMetadata": {},
        "version": PLAN_VERSION,
    }


def _bin_pack(slices: Sequence[FileSlice], limit: int) -> list[list[FileSlice]]:
    """First-fit decreasing: largest slices first, each into the first group with room.

    Hudi's strategy fills one group at a time after the same sort; first-fit packs at least
    as tightly, so no more file groups come out.
    """
    bins: list[tuple[int, list[FileSlice]]] = []
    for piece in sorted(slices, key=lambda s: (-s.total_size, s.file_id)):
        for index, (used, members) in enumerate(bins):
            if used + piece.total_size <= limit:
                members.append(piece)
                bins[index] = (used + piece.total_size, members)
                break
        else:
            bins.append((piece.total_size, [piece]))
    return [members for _, members in bins]


def _clustering_group(
    storage: Storage, members: Sequence[FileSlice], outputs: int, default_base_size: int
) -> dict[str, Any]:
    """A HoodieClusteringGroup: slices with full paths (Hudi opens them as given)."""
    log_size = sum(s.log_size for s in members)
    read = sum(s.base_file.size if s.base_file else 0 for s in members)
    write = sum(s.base_file.size if s.base_file else default_base_size for s in members)
    read_mb, write_mb = (read + log_size) // MIB, write // MIB
    return {
        "slices": [
            {
                "dataFilePath": storage.uri(s.base_file.path) if s.base_file else "",
                "deltaFilePaths": [storage.uri(log.path) for log in s.log_files],
                "fileId": s.file_id,
                "partitionPath": s.partition_path,
                "bootstrapFilePath": "",
                "version": PLAN_VERSION,
            }
            for s in members
        ],
        "metrics": {
            "TOTAL_IO_READ_MB": float(read_mb),
            "TOTAL_IO_WRITE_MB": float(write_mb),
            "TOTAL_IO_MB": float(read_mb + write_mb),
            "TOTAL_LOG_FILES_SIZE": float(log_size),
            "TOTAL_LOG_FILES": float(sum(len(s.log_files) for s in members)),
        },
        "numOutputFileGroups": outputs,
        "extraMetadata": None,
        "version": PLAN_VERSION,
    }


def _check_sort_columns(timeline: Timeline, columns: Sequence[str]) -> None:
    """Unknown sort columns are refused now rather than failing every Spark task later."""
    schema_json = timeline.latest_schema()
    if columns and schema_json:  # no schema yet: nothing was written, nothing to cluster
        check_columns(json.loads(schema_json), columns)


def check_columns(avro_schema: dict[str, Any], columns: Sequence[str]) -> None:
    """Refuse sort columns the schema lacks, and those tms's own sort cannot order."""
    known = [f["name"] for f in avro_schema["fields"]]
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise ValueError(
            f"unknown sort column(s) {', '.join(unknown)}; the table's columns are "
            f"{', '.join(c for c in known if c not in META_FIELDS)}"
        )
    unordered = unordered_columns(avro_schema, columns)
    if unordered:
        raise ValueError(_unordered_reason(unordered))


def unordered_columns(avro_schema: dict[str, Any], columns: Sequence[str]) -> list[str]:
    """The sort columns of a type Arrow's sort cannot order (a list or a map, or a struct
    holding one), each with its type; columns the schema lacks are left out."""
    schema = arrow_schema_from_avro(avro_schema)
    return [
        f"{column} ({schema.field(column).type})"
        for column in columns
        if schema.get_field_index(column) >= 0 and not _orderable(schema.field(column).type)
    ]


def declines(
    table: HudiTable, planning: Mapping[str, Any] | None, instant_time: str | None
) -> tuple[list[str], list[str]]:
    """Why tms's own clustering declines an operation (the sort columns its planning names,
    else its pending plan's): a column its sort cannot order. (native's reasons, Hudi's)."""
    if planning is None and instant_time is None:
        return [], []
    if planning is not None and not planning.get("sort_columns"):
        return [], []  # decided without reading the table
    timeline = table.timeline()
    columns: Sequence[str] = ()
    if planning is not None:
        columns = [c for c in planning["sort_columns"] if c]
    elif instant_time is not None:
        instant = timeline.get(instant_time)
        if instant is not None and instant.is_pending and timeline.is_clustering(instant):
            columns = plan_sort_columns(timeline.clustering_plan(instant))
    schema_json = timeline.latest_schema() if columns else None
    if not schema_json:
        return [], []
    unordered = unordered_columns(json.loads(schema_json), columns)
    return ([_unordered_reason(unordered)] if unordered else []), []


def plan_sort_columns(plan: Mapping[str, Any]) -> tuple[str, ...]:
    """The sort columns a clustering plan's strategy names (`SORT_COLUMNS_PARAM`)."""
    params = (plan.get("strategy") or {}).get("strategyParams") or {}
    named = (params.get(SORT_COLUMNS_PARAM) or "").split(",")
    return tuple(column.strip() for column in named if column.strip())


def _unordered_reason(unordered: Sequence[str]) -> str:
    return (
        f"sort column(s) {', '.join(unordered)} cannot be ordered by tms's own sort (a list "
        "or a map); run the clustering with executor hudi, or sort by other columns"
    )


def _orderable(data_type: pa.DataType) -> bool:
    try:
        pa.table({"column": pa.nulls(2, data_type)}).sort_by("column")
    except (pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return False
    return True


def _file_groups_being_written(table: HudiTable, timeline: Timeline) -> set[tuple[str, str]]:
    """File groups an inflight commit has written to, known from its markers."""
    busy: set[tuple[str, str]] = set()
    for instant in timeline.pending((Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)):
        for marker in list_markers(table.storage, instant.requested_time):
            name = BaseFileName.parse(marker.file_name) or LogFileName.parse(marker.file_name)
            if name is not None:
                busy.add((marker.partition_path, name.file_id))
    return busy
