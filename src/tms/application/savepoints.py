"""Savepoints of a registered table (`tms.hudi.savepoints`), listed, made and removed by the
service on the table itself, made and removed under the lock its writers use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from tms.application.cancel import TableAccess
from tms.application.table_locks import writers_lock
from tms.hudi.locks import LockSpec, use_advisory_locks
from tms.hudi.savepoints import Savepoint, create_savepoint, delete_savepoint
from tms.hudi.table import HudiTable
from tms.policies.params import table_wide_params
from tms.store import get_table

__all__ = ["SavepointTable", "savepoint_table"]


@dataclass(frozen=True)
class SavepointTable:
    """What storage calls on a registered table's savepoints need, read from the store
    before them (no transaction stays open while storage is read)."""

    base_path: str
    options: dict[str, Any]
    name: str
    lock_params: dict[str, Any]
    access: TableAccess

    def lock(self) -> LockSpec:
        """The writers' lock, waited for less than the storage call's bound."""
        return writers_lock(self.lock_params, self.access.timeout)

    def create(
        self, instant: str, user: str, comment: str
    ) -> Callable[[HudiTable], tuple[Savepoint, bool]]:
        """Make the savepoint at `instant` on the opened table (a `postgres` lock through
        the service's table locks)."""

        def made(table: HudiTable) -> tuple[Savepoint, bool]:
            with use_advisory_locks(self.access.locks):
                return create_savepoint(table, instant, user=user, comment=comment)

        return made

    def delete(self, instant: str) -> Callable[[HudiTable], bool]:
        """Remove the savepoint at `instant` on the opened table; False when there is none."""

        def deleted(table: HudiTable) -> bool:
            with use_advisory_locks(self.access.locks):
                return delete_savepoint(table, instant)

        return deleted


def savepoint_table(session: Session, table_id: int, access: TableAccess) -> SavepointTable:
    """The registered table `table_id` (`NotFound` otherwise), its transaction ended."""
    found = get_table(session, table_id)
    target = SavepointTable(
        found.base_path,
        dict(found.storage_options or {}),
        found.qualified_name,
        table_wide_params(found.policy or {}, "clean"),
        access,
    )
    session.rollback()
    return target
