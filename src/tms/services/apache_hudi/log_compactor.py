"""Hudi's write client as the executor of log compaction plans (`logCompact`), tms's or a
writer's: no Spark SQL procedure runs one.

A log compaction plan does not outlive a rollback (Hudi's `logCompact` rolls an inflight one
back with its plan and asks for a new one: its blocks would be written again under the instant
the rollback voided). So a run that fails, or one a crash left inflight, is rolled back with
its plan here too, and the operation asks to be submitted again."""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from tms.hudi.actions import LOG_COMPACTION
from tms.hudi.table import HudiTable
from tms.hudi.timeline.heartbeat import stop_heartbeat
from tms.hudi.timeline.instant import Action, State
from tms.services.apache_hudi.clients import table_write_client, write_configs
from tms.services.apache_hudi.executor import HUDI_STAGE, figures_of
from tms.services.apache_hudi.procedures import HudisCode
from tms.services.execution import ServiceResult, pending_plan
from tms.services.plan_executor import StageHook
from tms.services.rollback import rollback_inflight

__all__ = ["HudiLogCompactionExecutor"]


@dataclass(frozen=True)
class HudiLogCompactionExecutor(HudisCode):
    """Runs a pending log compaction plan, whoever planned it, with Hudi's write client
    (`logCompact`): the new log files, the delta commit and the metadata table's."""

    action: str = LOG_COMPACTION

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
        instant = pending_plan(table, instant_time, (Action.LOG_COMPACTION,))
        if instant.state is State.INFLIGHT:
            rollback_inflight(table, instant, heartbeat_interval=heartbeat_interval)
            raise RuntimeError(
                f"log compaction {instant_time} was left inflight by a run that ended: rolled "
                "back with its plan, as Hudi rolls back a log compaction (its plan cannot run "
                "again under the same instant)"
            )
        if on_stage is not None:
            on_stage(HUDI_STAGE)
        try:
            with table_write_client(spark, table, write_configs(table)) as client:
                client.logCompact(instant_time, True)
        except BaseException:
            with suppress(OSError):  # Hudi's heartbeat of the instant would hold off the rollback
                stop_heartbeat(table.storage, instant_time)
            left = table.timeline().get(instant_time)
            if left is not None and left.state is State.INFLIGHT:
                with suppress(Exception):  # the failure is what the operation reports
                    rollback_inflight(table, left, heartbeat_interval=heartbeat_interval)
            raise
        return figures_of(table, LOG_COMPACTION, instant_time, started)
