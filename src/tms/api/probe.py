"""Best-effort reads of a table on storage: its `hoodie.properties` and its timeline.

Requests that name a base path (register, commit callback, the Hudi client) use what they
can read and carry on without it: a table may live on storage this service cannot reach,
and that must not refuse a writer's notification. Reads happen before the request's
transaction starts where possible, to keep transactions short.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tms.hudi.instant import Action as HudiAction
from tms.hudi.table import HudiTable
from tms.store.models import TableType

__all__ = ["StorageInfo", "TableProbe"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StorageInfo:
    table_name: str
    database_name: str
    table_type: TableType | None
    table_version: int | None


class TableProbe:
    """Opens the table at `base_path` at most once and answers from what it read."""

    def __init__(self, base_path: str) -> None:
        self.base_path = base_path
        self._opened = False
        self._table: HudiTable | None = None

    def table(self) -> HudiTable | None:
        if not self._opened:
            self._opened = True
            try:
                self._table = HudiTable.open(self.base_path)
            except Exception as exc:  # any scheme, any failure: the caller carries on
                log.debug("cannot read a Hudi table at %s: %s", self.base_path, exc)
        return self._table

    def info(self) -> StorageInfo | None:
        table = self.table()
        if table is None:
            return None
        config = table.config
        try:
            table_type: TableType | None = TableType(config.table_type)
        except ValueError:
            table_type = None
        return StorageInfo(
            table_name=config.table_name,
            database_name=config.get("hoodie.database.name").strip(),
            table_type=table_type,
            table_version=config.table_version or None,
        )

    def action_of(self, instant_time: str) -> str | None:
        """The action of `instant_time` on the timeline; a completed compaction or
        clustering is named by what it was requested as, not by its commit action."""
        table = self.table()
        if table is None:
            return None
        try:
            timeline = table.timeline()
            instant = timeline.get(instant_time)
            if instant is None:
                return None
            if timeline.is_compaction(instant):
                return HudiAction.COMPACTION.value
            clustering = (HudiAction.REPLACE_COMMIT, HudiAction.CLUSTERING)
            if instant.action in clustering and timeline.is_clustering(instant):
                return HudiAction.CLUSTERING.value
            return instant.action.value
        except Exception as exc:
            log.debug("cannot read the timeline of %s: %s", self.base_path, exc)
            return None
