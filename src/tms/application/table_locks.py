"""A registered table opened with the lock its writers use, for work the service does on the
table itself (a cancel request, a savepoint) rather than through a job."""

from __future__ import annotations

from typing import Any

from tms.hudi.locks import LockSpec
from tms.hudi.table import HudiTable
from tms.planning import lock_settings

__all__ = ["open_locked", "writers_lock"]


def writers_lock(params: dict[str, Any], wait_seconds: float) -> LockSpec:
    """The lock the table's writers use (`params`: its lock settings in Hudi's keys), waited
    for a second less than `wait_seconds`, the storage call's bound."""
    wait_ms = int(max(1.0, wait_seconds - 1) * 1000)
    return LockSpec.from_settings({**lock_settings(params), "wait_ms": wait_ms})


def open_locked(
    base_path: str, options: dict[str, Any], params: dict[str, Any], wait_seconds: float
) -> HudiTable:
    """The table at `base_path` with `writers_lock`."""
    return HudiTable.open(
        base_path, storage_options=options, lock=writers_lock(params, wait_seconds)
    )
