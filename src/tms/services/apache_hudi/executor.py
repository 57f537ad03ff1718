"""Hudi's own code as the executor and planner of compaction, clustering and clean.

A plan tms planned is run by Hudi's procedure for that instant (`op => 'execute'`), and a plan
Hudi's procedure scheduled is a plan like any other on the timeline, which either executor
runs. The figures come from the commit Hudi completed, read as tms reads any commit."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any

from tms.hudi.actions import CLEAN, CLUSTERING, COMPACTION
from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.errors import PlanNotFoundError, UnsupportedTableError
from tms.hudi.locks import POSTGRES_PROVIDER
from tms.hudi.metadata.partitions import EXPRESSION_INDEX_PREFIX
from tms.hudi.table import HudiTable
from tms.hudi.timeline.heartbeat import stop_heartbeat
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import Timeline
from tms.services.apache_hudi.options import lock_options, procedure_options, session_options
from tms.services.apache_hudi.procedures import (
    HudisCode,
    call,
    catalog_table,
    ensure_hudi,
    hadoop_path,
    location_refusals,
    session,
)
from tms.services.execution import ServiceResult, pending_plan
from tms.services.plan_executor import StageHook

__all__ = ["HUDI_STAGE", "HudiExecutor", "HudiPlanner", "clean_refusals", "figures_of"]

HUDI_STAGE = "running Hudi's table service"
"""The progress stage of a run of Hudi's code (its Spark jobs are the attempt's)."""


@dataclass(frozen=True)
class _Run:
    """One run of Hudi's code on a table: the session its configs are set on, the table's
    location as Hudi names it and the procedures' `options` (the writers' lock)."""

    spark: Any
    path: str
    options: str


@contextmanager
def _running(
    spark: Any, table: HudiTable, extra: Mapping[str, str] | None = None
) -> Iterator[_Run]:
    """A run of Hudi's code on `table`, under tms's hold of a `postgres` lock (Hudi locks
    in-process inside it), after checking the job's Spark carries Hudi."""
    ensure_hudi(spark)
    refused = location_refusals(table.storage.base_path)
    if refused:
        raise UnsupportedTableError("; ".join(refused))
    configs = {**session_options(table), **(extra or {})}
    options = procedure_options(lock_options(table, table.lock))
    held = table.lock.hold(table.storage) if table.lock.provider == POSTGRES_PROVIDER else None
    with held or nullcontext(), session(spark, configs) as own:
        yield _Run(own, hadoop_path(table.storage.base_path), options)


def clean_refusals(table: HudiTable) -> list[str]:
    """Tables Hudi's clean damages. Hudi 1.2's clean keys the entries it writes to an
    expression index's partition as `column_stats` ones, and every write after it fails
    ("mismatched partition path"): seen with its writer's own inline clean too."""
    indexes = [p for p in table.config.metadata_partitions if p.startswith(EXPRESSION_INDEX_PREFIX)]
    if not indexes:
        return []
    return [
        f"Hudi 1.2's clean breaks a table with expression indexes ({', '.join(indexes)}): it "
        "writes their entries as column_stats ones, and the table's next write fails"
    ]


def figures_of(table: HudiTable, action: str, instant_time: str, started: float) -> ServiceResult:
    """The figures of the instant Hudi completed, from its commit (or clean) metadata."""
    timeline = table.timeline()
    instant = timeline.get(instant_time)
    duration = time.monotonic() - started
    if instant is None or not instant.is_completed:
        state = "MISSING" if instant is None else instant.state.name
        return ServiceResult(action, instant_time, state=state, duration_seconds=duration)
    if instant.action is Action.CLEAN:
        details = timeline.avro_details(instant, State.COMPLETED) or {}
        deleted = int(details.get("totalFilesDeleted") or 0)
        return ServiceResult(action, instant_time, files_deleted=deleted, duration_seconds=duration)
    metadata = timeline.commit_metadata(instant)
    stats = metadata.write_stats()
    groups = len({(s.partition_path, s.file_id) for s in stats})
    if isinstance(metadata, ReplaceCommitMetadata):  # clustering: the groups it rewrote
        groups = sum(len(ids) for ids in metadata.replaced_file_ids().values())
    return ServiceResult(
        action,
        instant_time,
        file_groups=groups,
        files_written=len(stats),
        bytes_written=sum(s.total_write_bytes for s in stats),
        records_written=sum(s.num_writes for s in stats),
        log_files_compacted=sum(s.total_log_files_compacted for s in stats),
        log_records_compacted=sum(s.total_log_records for s in stats),
        duration_seconds=duration,
    )


def _execute_with(procedure: str) -> Callable[[_Run, str], None]:
    """A run of `procedure` (`run_compaction`, `run_clustering`) on the plan at an instant."""

    def run_plan(run: _Run, instant_time: str) -> None:
        call(
            run.spark, procedure, op="execute", path=run.path, instants=instant_time,
            options=run.options,
        )  # fmt: skip

    return run_plan


def _run_clean(run: _Run, instant_time: str) -> None:
    # Hudi's clean runs every pending clean plan, oldest first, and schedules none
    with catalog_table(run.spark, run.path) as name:
        call(run.spark, "run_clean", table=name, schedule_in_line=False, options=run.options)


_PROCEDURES: Mapping[str, tuple[tuple[Action, ...], Callable[[_Run, str], None]]] = {
    COMPACTION: ((Action.COMPACTION,), _execute_with("run_compaction")),
    CLUSTERING: ((Action.CLUSTERING, Action.REPLACE_COMMIT), _execute_with("run_clustering")),
    CLEAN: ((Action.CLEAN,), _run_clean),
}


@dataclass(frozen=True)
class HudiExecutor(HudisCode):
    """A `PlanExecutor` that runs the pending plan of `action` with Hudi's procedure."""

    action: str

    def refusals(self, table: HudiTable) -> list[str]:
        reasons = super().refusals(table)
        if self.action == CLEAN:
            reasons += clean_refusals(table)
        return reasons

    def execute(
        self,
        spark: Any,
        table: HudiTable,
        instant_time: str,
        *,
        heartbeat_interval: float = 60.0,
        on_stage: StageHook | None = None,
    ) -> ServiceResult:
        started = time.monotonic()
        actions, procedure = _PROCEDURES[self.action]
        try:
            pending_plan(table, instant_time, actions)
        except PlanNotFoundError:
            # Hudi's clean plans and runs in one call (`HudiPlanner`): it ran when planned
            completed = table.timeline().get(instant_time)
            if self.action == CLEAN and completed is not None and completed.is_completed:
                return figures_of(table, self.action, instant_time, started)
            raise
        if on_stage is not None:
            on_stage(HUDI_STAGE)
        with _running(spark, table) as run:
            try:
                procedure(run, instant_time)
            except BaseException:
                # Hudi's client closes with the failed call and beats no more, but its
                # heartbeat file of the instant stays fresh for minutes, holding off the
                # rollback a cancel or retry makes: the run that wrote it has ended
                with suppress(OSError):  # then it expires, as after a crash
                    stop_heartbeat(table.storage, instant_time)
                raise
        return figures_of(table, self.action, instant_time, started)


def _new_plan(before: Timeline, after: Timeline, actions: tuple[Action, ...]) -> str | None:
    """The plan of `actions` that appeared between two reads of the timeline."""
    known = {i.requested_time for i in before.instants}
    new = [
        i.requested_time
        for i in after.instants
        if i.requested_time not in known and _is_of(after, i, actions)
    ]
    return max(new) if new else None


def _is_of(timeline: Timeline, instant: Instant, actions: tuple[Action, ...]) -> bool:
    return instant.action in actions or timeline.origin_action(instant) in actions


def _compaction_configs(params: Mapping[str, Any]) -> dict[str, str]:
    # plan whatever file slice has log files, as tms's planner does
    return {
        "hoodie.compact.inline.trigger.strategy": "NUM_COMMITS",
        "hoodie.compact.inline.max.delta.commits": "1",
    }


def _clustering_configs(params: Mapping[str, Any]) -> dict[str, str]:
    configs = {"hoodie.clustering.inline.max.commits": "1"}
    keys = {
        "target_file_size": "hoodie.clustering.plan.strategy.target.file.max.bytes",
        "small_file_limit": "hoodie.clustering.plan.strategy.small.file.limit",
        "max_bytes_per_group": "hoodie.clustering.plan.strategy.max.bytes.per.group",
    }
    for name, key in keys.items():
        if params.get(name) is not None:
            configs[key] = str(int(params[name]))
    columns = params.get("sort_columns")
    if columns:
        listed = columns.split(",") if isinstance(columns, str) else list(columns)
        configs["hoodie.clustering.plan.strategy.sort.columns"] = ",".join(listed)
    return configs


def _clean_arguments(params: Mapping[str, Any]) -> dict[str, object]:
    policy = str(params.get("policy") or "KEEP_LATEST_COMMITS")
    retained = int(params.get("retained") or 10)
    count = "file_versions_retained" if policy == "KEEP_LATEST_FILE_VERSIONS" else "retain_commits"
    return {"clean_policy": policy, count: retained}


@dataclass(frozen=True)
class HudiPlanner:
    """Schedules a plan of `action` with Hudi's procedure, from tms's planning parameters
    mapped to Hudi's configs. A clean is planned and run in one call (Hudi has no procedure
    that only plans one); its executor then reports what it did."""

    action: str

    def schedule(self, spark: Any, table: HudiTable, params: Mapping[str, Any]) -> str | None:
        actions, _ = _PROCEDURES[self.action]
        before = table.timeline()
        if self.action == COMPACTION:
            with _running(spark, table, _compaction_configs(params)) as run:
                call(run.spark, "run_compaction", op="schedule", path=run.path, options=run.options)
        elif self.action == CLUSTERING:
            with _running(spark, table, _clustering_configs(params)) as run:
                call(run.spark, "run_clustering", op="schedule", path=run.path, options=run.options)
        else:
            with _running(spark, table) as run, catalog_table(run.spark, run.path) as name:
                arguments = _clean_arguments(params)
                call(run.spark, "run_clean", table=name, options=run.options, **arguments)
        return _new_plan(before, table.timeline(), actions)
