"""Hudi's write client as the archiver of a table's timeline (`archive()`): for tables whose
writers do not archive (writers stopped, or `hoodie.archive.automatic=false`).

Archival writes no instant and leaves no plan: it is done at once, on Spark with Hudi's bundle
(`TableService.direct_work`). tms's dry run (`tms.services.archival.plan`) says first whether
anything is due, with the keep.min and keep.max Hudi is then given; Hudi's archiver decides
again under the writers' lock, and the figures say what it moved and what the dry run said."""

from __future__ import annotations

import logging
import time
from typing import Any

from tms.hudi.table import HudiTable
from tms.hudi.timeline.timeline import InstantKey, instant_key
from tms.services.apache_hudi.clients import table_write_client, write_configs
from tms.services.apache_hudi.procedures import HudisCode
from tms.services.archival.plan import KEEP_MAX_KEY, KEEP_MIN_KEY, ArchivalPlan, plan_archival

__all__ = ["HUDI_ARCHIVER", "archival_configs", "archive", "nothing_to_archive"]

log = logging.getLogger(__name__)

HUDI_ARCHIVER = HudisCode()
"""Hudi's code as archival's one executor: refused where it cannot reach the table."""


def archival_configs(table: HudiTable, plan: ArchivalPlan) -> dict[str, str]:
    """The write configs Hudi archives with: the table's own (`write_configs`), and keep.min
    and keep.max as the dry run took them. Automatic archival stays off: `archive()` is
    called, not left to a commit."""
    return {
        **write_configs(table),
        KEEP_MIN_KEY: str(plan.configured.min),
        KEEP_MAX_KEY: str(plan.configured.max),
    }


def nothing_to_archive(
    table: HudiTable, *, keep_min: int | None = None, keep_max: int | None = None
) -> dict[str, Any] | None:
    """The figures of an archival with nothing due, from the dry run before any Spark starts;
    None when something is (Hudi's archiver decides again as it runs)."""
    plan = plan_archival(table, keep_min=keep_min, keep_max=keep_max)
    return None if plan.due else _nothing_due(plan)


def _nothing_due(plan: ArchivalPlan) -> dict[str, Any]:
    return {"nothing_to_do": True, "reason": plan.reason, "stopped_by": plan.stopped_by}


def archive(
    table: HudiTable,
    *,
    spark: Any,
    keep_min: int | None = None,
    keep_max: int | None = None,
) -> dict[str, Any]:
    """Archive the timeline of `table` with Hudi's write client, if the dry run finds anything
    due; the figures: what Hudi archived, what the dry run said, and why it stopped there."""
    started = time.monotonic()
    plan = plan_archival(table, keep_min=keep_min, keep_max=keep_max)
    if not plan.due:
        log.info("nothing to archive: %s", plan.reason)
        return _nothing_due(plan)
    before = _active(table)
    with table_write_client(spark, table, archival_configs(table, plan)) as client:
        client.archive()
    after = table.timeline()
    gone = [i for key, i in before.items() if key not in {instant_key(j) for j in after.instants}]
    planned = {instant_key(i) for i in plan.instants}
    moved = {instant_key(i) for i in gone}
    if moved != planned:
        log.warning(
            "Hudi archived %s; the dry run said %s",
            sorted(i.requested_time for i in gone),
            sorted(i.requested_time for i in plan.instants),
        )
    commits = after.commits()
    return {
        "instants_archived": len(gone),
        "first_archived": min((i.requested_time for i in gone), default=None),
        "last_archived": max((i.requested_time for i in gone), default=None),
        "earliest_kept": commits[0].requested_time if commits else None,
        "as_planned": moved == planned,
        "planned_instants": len(plan.instants),
        "stopped_by": plan.stopped_by,
        "reason": plan.reason,
        "duration_seconds": round(time.monotonic() - started, 3),
    }


def _active(table: HudiTable) -> dict[InstantKey, Any]:
    return {instant_key(i): i for i in table.timeline().instants}
