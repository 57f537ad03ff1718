"""The partition TTL dry run of a registered table (`tms.services.partition_ttl.plan`): the
partitions a partition TTL of `days` days would delete now and those it keeps, each with why,
read from storage only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from tms.hudi.table import HudiTable
from tms.planning import DEFAULT_TTL_MAX_PARTITIONS
from tms.services.partition_ttl.plan import dry_run
from tms.store import get_table

__all__ = ["TtlTable", "ttl_table"]


@dataclass(frozen=True)
class TtlTable:
    """What the dry run on a registered table needs, read from the store before storage is."""

    base_path: str
    options: dict[str, Any]
    name: str
    policy: dict[str, Any] = field(default_factory=dict)
    """The table's policy: its `ttl_days`, `ttl_partitions` and `ttl_max_partitions` stand
    for what a dry run does not say."""

    def settings(
        self, days: int | None, patterns: Sequence[str] | None, max_partitions: int | None
    ) -> tuple[int | None, Sequence[str], int]:
        """The dry run's days, patterns and max partitions: those asked for, else the table
        policy's, else (patterns, max partitions) the defaults; days None when neither
        says."""
        policy = self.policy
        policy_days = policy.get("ttl_days")
        chosen_days = days if days is not None else policy_days
        if patterns is None:
            patterns = tuple(policy.get("ttl_partitions") or ())
        if max_partitions is None:
            max_partitions = int(policy.get("ttl_max_partitions") or DEFAULT_TTL_MAX_PARTITIONS)
        return (int(chosen_days) if chosen_days is not None else None), patterns, max_partitions

    def dry_run(
        self,
        days: int,
        patterns: Sequence[str] = (),
        max_partitions: int = DEFAULT_TTL_MAX_PARTITIONS,
    ) -> Callable[[HudiTable], dict[str, Any]]:
        """The dry run on the opened table as of now, as a dict (`TtlReport.to_dict`)."""

        def read(table: HudiTable) -> dict[str, Any]:
            report = dry_run(
                table, ttl_days=days, ttl_partitions=patterns, ttl_max_partitions=max_partitions
            )
            return report.to_dict()

        return read


def ttl_table(session: Session, table_id: int) -> TtlTable:
    """The registered table `table_id` (`NotFound` otherwise), its transaction ended."""
    found = get_table(session, table_id)
    target = TtlTable(
        found.base_path,
        dict(found.storage_options or {}),
        found.qualified_name,
        dict(found.policy or {}),
    )
    session.rollback()
    return target
