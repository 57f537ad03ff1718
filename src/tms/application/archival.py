"""The archival dry run of a registered table (`tms.services.archival.plan`): what Hudi's
archiver would move out of its active timeline now and why it stops there, read from storage
only. keep.min and keep.max are the request's, else the table policy's (those its policy-made
archival operations carry), else the table's own, else Hudi's defaults."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from tms.hudi.actions import ARCHIVAL
from tms.hudi.table import HudiTable
from tms.planning import schedule_kwargs
from tms.policies.params import policy_params
from tms.services.archival.plan import plan_archival
from tms.store import ServiceAction, get_table

__all__ = ["ArchivalTable", "archival_table"]


@dataclass(frozen=True)
class ArchivalTable:
    """What the dry run on a registered table needs, read from the store before storage is."""

    base_path: str
    options: dict[str, Any]
    name: str
    policy_keep: Mapping[str, Any]
    """keep_min and keep_max as the table policy sets them for its archival operations."""

    def dry_run(
        self, keep_min: int | None, keep_max: int | None
    ) -> Callable[[HudiTable], dict[str, Any]]:
        """The dry run on the opened table, as a dict (`ArchivalPlan.to_dict`);
        `BadJobInput` naming the parameter when keep.max would not be above keep.min."""
        keep = {**schedule_kwargs(ARCHIVAL, self.policy_keep)}
        if keep_min is not None:
            keep["keep_min"] = keep_min
        if keep_max is not None:
            keep["keep_max"] = keep_max

        def read(table: HudiTable) -> dict[str, Any]:
            return plan_archival(table, **keep).to_dict()

        return read


def archival_table(session: Session, table_id: int) -> ArchivalTable:
    """The registered table `table_id` (`NotFound` otherwise), its transaction ended."""
    found = get_table(session, table_id)
    target = ArchivalTable(
        found.base_path,
        dict(found.storage_options or {}),
        found.qualified_name,
        policy_params(found.policy or {}, ServiceAction.ARCHIVAL),
    )
    session.rollback()
    return target
