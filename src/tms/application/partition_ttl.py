"""The partition TTL dry run of a registered table (`tms.services.partition_ttl.plan`): the
partitions a partition TTL of `days` days would delete now and those it keeps, each with why,
read from storage only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
    target = TtlTable(found.base_path, dict(found.storage_options or {}), found.qualified_name)
    session.rollback()
    return target
