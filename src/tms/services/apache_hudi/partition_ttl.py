"""Hudi's write client as the executor of partition TTL plans: `deletePartitions` on the plan's
instant (Hudi 1.2's delete-partition executor takes the `replacecommit.requested` it finds,
checks no pending compaction, log compaction or clustering holds a partition, moves it
inflight), then `commit` of the replacecommit replacing every file group of the partitions, the
metadata table's delta commit with it. No Spark SQL procedure runs a plan made beforehand
(`run_ttl` plans and deletes in one call).

Before Hudi's code runs, the plan is checked against the table as it is now
(`plan_refusals`): a partition it deletes that pending work holds, or that a write completed
since the plan went to, means the plan no longer holds; it is removed (it is only requested:
nothing was written) and the operation fails, saying to submit again. A run that fails, or
one a crash left inflight, is rolled back to its requested plan (a replacecommit's plan
outlives a rollback, as a clustering's), so a retry runs the same plan."""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.actions import PARTITION_TTL
from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.errors import InstantInFlightError, PlanNotFoundError
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import delete_pending
from tms.services.apache_hudi.clients import table_write_client, write_configs
from tms.services.apache_hudi.executor import HUDI_STAGE
from tms.services.apache_hudi.procedures import HudisCode
from tms.services.execution import ServiceResult, pending_plan
from tms.services.partition_ttl.plan import plan_refusals, planned_partitions
from tms.services.plan_executor import StageHook
from tms.services.rollback import rollback_inflight

__all__ = ["HudiPartitionTtlExecutor", "PartitionTtlResult"]

REPLACE_COMMIT = Action.REPLACE_COMMIT.value


@dataclass
class PartitionTtlResult(ServiceResult):
    """A partition TTL's figures: the partitions it deleted and, per partition, the file
    groups it replaced (their files go with the next clean)."""

    partitions_deleted: list[str] = field(default_factory=list)
    file_groups_by_partition: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class HudiPartitionTtlExecutor(HudisCode):
    """Runs a pending partition TTL plan of tms with Hudi's write client."""

    action: str = PARTITION_TTL

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
        instant, partitions = _pending_ttl(table, instant_time)
        if heartbeat.is_alive(table.storage, instant_time, heartbeat_interval):
            raise InstantInFlightError(
                f"partition TTL {instant_time} has a live heartbeat (a job is running it)"
            )
        rolled_back: list[str] = []
        if instant.state is State.INFLIGHT:
            rolled = rollback_inflight(table, instant, heartbeat_interval=heartbeat_interval)
            rolled_back.append(rolled.rollback_instant)
            instant = Instant(instant_time, instant.action, State.REQUESTED)
        _check_still_due(table, instant, partitions)
        if on_stage is not None:
            on_stage(HUDI_STAGE)
        try:
            _delete_partitions(spark, table, instant_time, partitions)
        except BaseException:
            _roll_back(table, instant_time, heartbeat_interval)
            raise
        finally:
            with suppress(OSError):  # Hudi's heartbeat file of the instant: its run has ended
                heartbeat.stop_heartbeat(table.storage, instant_time)
        result = _figures(table, instant_time, started)
        result.rolled_back = rolled_back
        return result


def _pending_ttl(table: HudiTable, instant_time: str) -> tuple[Instant, list[str]]:
    """The pending plan and the partitions it deletes; `PlanNotFoundError` when the instant
    is no partition TTL plan of tms (a clustering, or a writer's own delete_partition)."""
    instant = pending_plan(table, instant_time, (Action.REPLACE_COMMIT,))
    partitions = planned_partitions(table.timeline(), instant)
    if partitions is None:
        raise PlanNotFoundError(
            f"replacecommit {instant_time} is no partition TTL plan of tms (a clustering, or a "
            "delete_partition that records no partitions)"
        )
    return instant, partitions


def _check_still_due(table: HudiTable, instant: Instant, partitions: list[str]) -> None:
    """Remove the requested plan and fail when the table no longer lets it run as made."""
    reasons = plan_refusals(table, instant, partitions)
    if not reasons:
        return
    delete_pending(table.storage, table.config, instant)
    raise RuntimeError(
        f"partition TTL {instant.requested_time} no longer holds: {'; '.join(reasons)}; its "
        "plan was removed (nothing had been written)"
    )


def _delete_partitions(
    spark: Any, table: HudiTable, instant_time: str, partitions: list[str]
) -> None:
    """Hudi's `deletePartitions` on the plan's instant and the replacecommit's `commit`, with
    Hudi's heartbeat on the instant (a lazily cleaning writer's commit requires one)."""
    jvm = spark._jvm
    names = jvm.java.util.ArrayList()
    for partition in partitions:
        names.add(partition)
    empty = jvm.org.apache.hudi.common.util.Option.empty()
    with table_write_client(spark, table, write_configs(table)) as client:
        client.getHeartbeatClient().start(instant_time)
        written = client.deletePartitions(names, instant_time)
        replaced = written.getPartitionToReplaceFileIds()
        client.commit(instant_time, written.getWriteStatuses(), empty, REPLACE_COMMIT, replaced)


def _roll_back(table: HudiTable, instant_time: str, heartbeat_interval: float) -> None:
    """After a failed run: the instant, if Hudi moved it inflight, back to its plan."""
    with suppress(OSError):  # Hudi's heartbeat of the instant would hold off the rollback
        heartbeat.stop_heartbeat(table.storage, instant_time)
    left = table.timeline().get(instant_time)
    if left is not None and left.state is State.INFLIGHT:
        with suppress(Exception):  # the failure is what the operation reports
            rollback_inflight(table, left, heartbeat_interval=heartbeat_interval)


def _figures(table: HudiTable, instant_time: str, started: float) -> PartitionTtlResult:
    """The figures of the replacecommit Hudi completed: the file groups it replaced."""
    timeline = table.timeline()
    instant = timeline.get(instant_time)
    duration = round(time.monotonic() - started, 3)
    if instant is None or not instant.is_completed:
        state = "MISSING" if instant is None else instant.state.name
        return PartitionTtlResult(PARTITION_TTL, instant_time, state, duration_seconds=duration)
    metadata = timeline.commit_metadata(instant)
    replaced = (
        metadata.partition_to_replace_file_ids
        if isinstance(metadata, ReplaceCommitMetadata)
        else {}
    )
    groups = {partition: len(ids) for partition, ids in sorted(replaced.items())}
    return PartitionTtlResult(
        PARTITION_TTL,
        instant_time,
        file_groups=sum(groups.values()),
        duration_seconds=duration,
        partitions_deleted=sorted(replaced),
        file_groups_by_partition=groups,
    )
