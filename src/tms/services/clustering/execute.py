"""Clustering: many small file groups of a partition rewritten into fewer, larger ones.

Scheduling writes `<ts>.replacecommit.requested` holding Hudi's clustering plan (input groups
of file slices, as `SparkSizeBasedClusteringPlanStrategy` builds them); executing runs one Spark
task per input group, which merges its slices (base file + committed log blocks), optionally
sorts the rows, and writes new file groups, within the task's memory budget (slices merged
and rows sorted through local disk past it). A group whose plan asks for several output file
groups is split over that many tasks by key range instead (of its first sort column, or of
the record key), as Hudi's sort-and-size strategy sorts a group over `numOutputFileGroups`
Spark partitions. The
completed `<ts>.replacecommit` names the input file groups as replaced, so readers switch to
the new ones atomically.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.avro.schema import arrow_schema_from_avro, with_meta_fields
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import PlanNotFoundError
from tms.hudi.files.codec import parquet_codec
from tms.hudi.files.write_conflicts import FileGroupId
from tms.hudi.merge_config import record_merging
from tms.hudi.metadata.partitions import RECORD_INDEX
from tms.hudi.metadata.record_index_logs import record_index_logs
from tms.hudi.metadata.writer import PendingDeltaCommit
from tms.hudi.record_keys import KeyGeneration, virtual_key_generation
from tms.hudi.table import HudiTable
from tms.hudi.table_paths import TablePaths
from tms.hudi.timeline.instant import Action, Instant
from tms.hudi.timeline.timeline import CLUSTER_OPERATION, Timeline
from tms.services.clustering.plan import (
    HUDI_TARGET_FILE_SIZE,
    TARGET_FILE_SIZE_PARAM,
    check_columns,
    plan_sort_columns,
    schedule_clustering,
)
from tms.services.clustering.ranges import rewrite_split_groups, splittable
from tms.services.clustering.rewrite import GroupResult, GroupTask, SliceInput, rewrite_group
from tms.services.execution import ServiceResult
from tms.services.metadata_sync import WrittenFile
from tms.services.plan_executor import CommitActionExecutor, ExecutionContext
from tms.services.spark import TaskInfo

__all__ = ["ClusteringExecutor", "execute_clustering", "schedule_clustering"]


# Execution ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ClusteringPlan:
    """A pending clustering plan as read for its execution."""

    plan: dict[str, Any]
    groups: tuple[tuple[SliceInput, ...], ...]
    outputs: tuple[int, ...]
    """Each group's output file groups (`numOutputFileGroups`)."""
    replaced: dict[str, list[str]]
    """The input file ids by partition: the file groups the replacecommit replaces."""
    file_groups: frozenset[FileGroupId]
    sort_columns: tuple[str, ...]
    target_file_size: int
    schema_json: str | None
    keys: KeyGeneration | None


class ClusteringExecutor(CommitActionExecutor[_ClusteringPlan, GroupTask, GroupResult]):
    """Each input group's slices merged, sorted and written as new file groups by its own
    Spark task; the completed `<ts>.replacecommit` names the input file groups replaced."""

    name = "clustering"
    stage = "clustering"
    plan_actions = (Action.REPLACE_COMMIT, Action.CLUSTERING)
    conflicts_on_log_files = True
    writes_new_file_groups = True

    def read_plan(self, table: HudiTable, timeline: Timeline, instant: Instant) -> _ClusteringPlan:
        instant_time = instant.requested_time
        if not timeline.is_clustering(instant):
            raise PlanNotFoundError(f"replacecommit {instant_time} is not a clustering plan")
        plan = timeline.clustering_plan(instant)
        params = (plan.get("strategy") or {}).get("strategyParams") or {}
        sort_columns = plan_sort_columns(plan)
        schema_json = timeline.latest_schema()
        keys = virtual_key_generation(table.config)
        if schema_json:
            _check_schema(json.loads(schema_json), sort_columns, keys)
        paths = TablePaths(table.storage, f"clustering plan {instant_time}")
        groups = _input_groups(plan, paths)
        replaced: dict[str, list[str]] = defaultdict(list)
        for slices in groups:
            for piece in slices:
                replaced[piece.partition_path].append(piece.file_id)
        return _ClusteringPlan(
            plan=plan,
            groups=groups,
            outputs=tuple(
                max(1, int(group.get("numOutputFileGroups") or 1))
                for group in plan.get("inputGroups") or []
            ),
            replaced=dict(replaced),
            file_groups=frozenset((p, f) for p, ids in replaced.items() for f in ids),
            sort_columns=sort_columns,
            target_file_size=int(params.get(TARGET_FILE_SIZE_PARAM) or HUDI_TARGET_FILE_SIZE),
            schema_json=schema_json,
            keys=keys,
        )

    def begin_sync(self, context: ExecutionContext) -> PendingDeltaCommit | None:
        sync = context.sync
        if sync is None:
            return None
        return sync.begin(context.instant_time, sync.clustering_partitions())

    def tasks(self, plan: _ClusteringPlan, context: ExecutionContext) -> Sequence[GroupTask]:
        timeline, sync, pending = context.timeline, context.sync, context.pending
        record_index = None
        if pending is not None and RECORD_INDEX in pending.partitions:
            record_index = record_index_logs(pending)
        template = GroupTask(
            base_uri=context.table.base_path,
            instant_time=context.instant_time,
            slices=(),
            sort_columns=plan.sort_columns,
            target_file_size=plan.target_file_size,
            ordering_fields=record_merging(context.table.config).compared_fields,
            schema_json=plan.schema_json,
            completed=frozenset(i.requested_time for i in timeline.instants if i.is_completed),
            earliest_active=timeline.instants[0].requested_time,
            keys=plan.keys,
            stats=sync.stats_spec if sync is not None else None,
            record_index=record_index,
            cancellable=context.cancellable,
            conflicts=context.conflicts,
            memory_budget=context.memory_budget,
            codec=parquet_codec(
                context.table.storage,
                context.table.config,
                (s.base_file for group in plan.groups for s in group if s.base_file),
            ),
        )
        return [
            replace(template, slices=slices, outputs=outputs)
            for slices, outputs in zip(plan.groups, plan.outputs, strict=True)
        ]

    def task_function(
        self, plan: _ClusteringPlan, context: ExecutionContext
    ) -> Callable[[GroupTask, TaskInfo], GroupResult]:
        return rewrite_group

    def run(
        self,
        spark: Any,
        plan: _ClusteringPlan,
        context: ExecutionContext,
        tasks: Sequence[GroupTask],
        description: str,
    ) -> list[GroupResult]:
        """Groups whose plan asks for several output file groups are split over that many
        tasks by key range (`tms.services.clustering.ranges`); the others are rewritten by
        one task each."""
        split: list[GroupTask] = []
        whole: list[GroupTask] = []
        for task in tasks:
            (split if splittable(task) else whole).append(task)
        outcomes, uncut = rewrite_split_groups(spark, split, description)
        return outcomes + super().run(spark, plan, context, [*uncut, *whole], description)

    def written(self, outcomes: Sequence[GroupResult]) -> list[WrittenFile]:
        return [w for outcome in outcomes for w in outcome.written]

    def commit_metadata(
        self, plan: _ClusteringPlan, schema: Mapping[str, str]
    ) -> ReplaceCommitMetadata:
        return ReplaceCommitMetadata(
            extra_metadata=dict(schema),
            operation_type=CLUSTER_OPERATION,
            partition_to_replace_file_ids=dict(plan.replaced),
        )

    def replaced(self, plan: _ClusteringPlan) -> dict[str, list[str]]:
        return plan.replaced

    def metadata_logs(self, outcomes: Sequence[GroupResult]) -> list[WriteStat]:
        return [stat for outcome in outcomes for stat in outcome.metadata_logs]

    def totals(
        self, result: ServiceResult, plan: _ClusteringPlan, outcomes: Sequence[GroupResult]
    ) -> None:
        result.file_groups = sum(len(ids) for ids in plan.replaced.values())
        result.log_files_compacted = sum(o.log_files for o in outcomes)
        result.log_records_compacted = sum(o.log_records for o in outcomes)


execute_clustering = ClusteringExecutor().execute
"""Run a pending clustering plan and complete its replacecommit
(`CommitActionExecutor.execute`)."""


def _check_schema(
    schema: dict[str, Any], sort_columns: Sequence[str], keys: KeyGeneration | None
) -> None:
    """Refuse, before anything is written, sort columns the schema lacks and virtual key
    fields of types the key generator cannot print."""
    check_columns(schema, list(sort_columns))
    if keys is not None:
        keys.check_field_types(arrow_schema_from_avro(with_meta_fields(schema)))


def _input_groups(plan: dict[str, Any], paths: TablePaths) -> tuple[tuple[SliceInput, ...], ...]:
    """The plan's input groups, each the slices one Spark task rewrites."""
    return tuple(
        tuple(_slice_input(piece, paths) for piece in group.get("slices") or [])
        for group in plan.get("inputGroups") or []
    )


def _slice_input(piece: dict[str, Any], paths: TablePaths) -> SliceInput:
    """Plan paths are full paths (or names); each must be a file directly in the slice's
    partition folder inside the table, where new files of that partition are written too."""
    partition = paths.partition(piece.get("partitionPath") or "")
    base = piece.get("dataFilePath") or ""
    return SliceInput(
        partition_path=partition,
        file_id=paths.name(str(piece["fileId"]), "file id"),
        base_file=paths.data_file(partition, base) if base else None,
        log_files=tuple(paths.data_file(partition, p) for p in piece.get("deltaFilePaths") or []),
    )
