"""What storage shows at a base path: is there a Hudi table, and what does it say.

Requests that name a base path (register, commit callback, the Hudi client) read the table
through a probe, on a `BlockingCalls` thread (storage may hang), before their transaction
starts. A probe never raises: storage that cannot be read is an answer too
(`TableState.UNREADABLE`), and each caller decides what it means for its request. The
storage's own error texts go to the log only: they can describe internal hosts and ports.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tms.hudi.properties import PROPERTIES_PATH
from tms.hudi.storage import Storage
from tms.hudi.storage.retry import is_transient
from tms.hudi.table import HudiTable
from tms.ingest.commit_action import timeline_action
from tms.store import TableType

__all__ = ["Seen", "StorageInfo", "StorageUnavailable", "TableProbe", "TableState"]

log = logging.getLogger(__name__)


class TableState(enum.Enum):
    TABLE = "table"
    """`hoodie.properties` is there (`Seen.table` is None if it could not be loaded)."""
    ABSENT = "absent"
    """Storage answered: no `hoodie.properties` under the base path."""
    UNREADABLE = "unreadable"
    """Storage could not be read (no access, unknown host, …)."""


@dataclass(frozen=True)
class StorageInfo:
    table_name: str
    database_name: str
    table_type: TableType | None
    table_version: int | None


@dataclass(frozen=True)
class Seen:
    state: TableState
    table: HudiTable | None = None

    @property
    def info(self) -> StorageInfo | None:
        if self.table is None:
            return None
        config = self.table.config
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


class StorageUnavailable(Exception):
    """The table's storage kept failing in a passing way (5xx, throttling, resets, stalls)
    through every retry: an answer read now would be a guess, so the caller refuses and the
    writer or the next pull round tries again."""

    def __init__(self, base_path: str) -> None:
        super().__init__(f"the storage of {base_path} failed after its retries")


class TableProbe:
    """Reads the table at `base_path` (with its `storage_options`, if any) at most once and
    answers from what it read. Its methods do storage I/O: call them through `BlockingCalls`."""

    def __init__(self, base_path: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.base_path = base_path
        self._options = storage_options
        self._seen: Seen | None = None
        self._failure: Exception | None = None

    def look(self) -> Seen:
        if self._seen is None:
            self._seen = self._read()
        return self._seen

    def _read(self) -> Seen:
        try:
            if not Storage(self.base_path, storage_options=self._options).exists(PROPERTIES_PATH):
                return Seen(TableState.ABSENT)
        except Exception as exc:  # any scheme, any failure: the caller decides
            log.warning("cannot read storage at %s: %s", self.base_path, exc)
            self._failure = exc
            return Seen(TableState.UNREADABLE)
        try:
            return Seen(TableState.TABLE, HudiTable.open(self.base_path, self._options))
        except Exception as exc:
            log.warning("cannot load the Hudi table at %s: %s", self.base_path, exc)
            self._failure = exc
            return Seen(TableState.TABLE)

    def action_of(self, instant_time: str) -> str | None:
        """The action of `instant_time` on the timeline; a completed compaction or
        clustering is named by what it was requested as, not by its commit action.
        `StorageUnavailable` when storage failed in a passing way after its retries."""
        table = self.look().table
        if table is None:
            if self._failure is not None and is_transient(self._failure):
                raise StorageUnavailable(self.base_path) from self._failure
            return None
        try:
            timeline = table.timeline()
            instant = timeline.get(instant_time)
            if instant is None:
                return None
            return timeline_action(timeline, instant)
        except Exception as exc:
            if is_transient(exc):
                raise StorageUnavailable(self.base_path) from exc
            log.warning("cannot read the timeline of %s: %s", self.base_path, exc)
            return None
