"""Which metadata table log blocks a reader may use (`HoodieTableMetadataUtil.
getValidInstantTimestamps` of Hudi 1.x).

The metadata table commits its delta commit before the data table commits the instant it
belongs to, so a block counts only when its instant is valid:

- a completed instant of the data table;
- a completed delta commit of the metadata table whose instant is not pending on the data table
  (the indexer's delta commits have no data table commit of their own);
- an instant that a completed data table rollback or restore rolled back, when that rollback
  is later than the earliest valid instant (its blocks stay until the rollback's own undo);
- a completed rollback or restore of the metadata table;
- the metadata table's bootstrap delta commits (`00000000000000…`).
"""

from __future__ import annotations

from typing import Any

from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import Timeline

__all__ = ["BOOTSTRAP_PREFIX", "rolled_back_instants", "valid_instant_times"]

BOOTSTRAP_PREFIX = "00000000000000"
"""`SOLO_COMMIT_TIMESTAMP`: the metadata table's initialising delta commits start with it."""
_UNDO_ACTIONS = (Action.ROLLBACK, Action.RESTORE)


def valid_instant_times(data: Timeline, metadata: Timeline) -> set[str]:
    pending_data = {i.requested_time for i in data.instants if i.is_pending}
    valid = {i.requested_time for i in data.completed()}
    valid |= {
        i.requested_time
        for i in metadata.completed((Action.DELTA_COMMIT,))
        if i.requested_time not in pending_data
    }
    earliest = min(valid) if valid else BOOTSTRAP_PREFIX
    for undo in data.completed(_UNDO_ACTIONS):
        if undo.requested_time > earliest:
            valid |= rolled_back_instants(data, undo)
    valid |= {i.requested_time for i in metadata.completed(_UNDO_ACTIONS)}
    valid |= {
        i.requested_time
        for i in metadata.completed((Action.DELTA_COMMIT,))
        if i.requested_time.startswith(BOOTSTRAP_PREFIX)
    }
    return valid


def rolled_back_instants(timeline: Timeline, undo: Instant) -> set[str]:
    """Instants a rollback (its metadata, else its plan) or a restore rolled back."""
    metadata: dict[str, Any] | None = timeline.avro_details(undo, State.COMPLETED)
    if undo.action is Action.ROLLBACK:
        if metadata and metadata.get("commitsRollback"):
            return set(metadata["commitsRollback"])
        plan = timeline.avro_details(undo, State.REQUESTED) or {}
        target = plan.get("instantToRollback") or {}
        return {target["commitTime"]} if target.get("commitTime") else set()
    rolled: set[str] = set()
    for rollbacks in ((metadata or {}).get("hoodieRestoreMetadata") or {}).values():
        for rollback in rollbacks or []:
            rolled |= set(rollback.get("commitsRollback") or [])
    return rolled
