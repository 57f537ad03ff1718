"""Moving instants through their states on storage: requested → inflight → completed.

Layout 1 keeps the files of earlier states beside the completed one, as Hudi does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, Instant, State, format_instant_time


def new_instant_time(existing: Sequence[Instant]) -> str:
    """A new instant time after every instant on the timeline (instant times are unique)."""
    latest = max((i.requested_time for i in existing), default="")
    while True:
        candidate = format_instant_time(datetime.now(UTC))
        if candidate > latest:
            return candidate
        time.sleep(0.001)


def instant_file(config: TableConfig, instant: Instant) -> str:
    return f"{config.timeline_path}/{instant.file_name(config.timeline_layout_version)}"


def request(
    storage: Storage, config: TableConfig, instant_time: str, action: Action, content: bytes = b""
) -> Instant:
    instant = Instant(instant_time, action, State.REQUESTED)
    storage.write_bytes(instant_file(config, instant), content)
    return instant


def transition(
    storage: Storage, config: TableConfig, instant: Instant, state: State, content: bytes = b""
) -> Instant:
    """Write the file of the next state; a completed instant gets its completion time."""
    completion = format_instant_time(datetime.now(UTC)) if state is State.COMPLETED else None
    moved = instant.with_state(state, completion)
    storage.write_bytes(instant_file(config, moved), content)
    return moved


def revert_to_requested(storage: Storage, config: TableConfig, instant: Instant) -> Instant:
    """Drop the inflight file of a pending plan, so it can be executed again from scratch."""
    inflight = Instant(instant.requested_time, instant.action, State.INFLIGHT)
    storage.delete(instant_file(config, inflight))
    return Instant(instant.requested_time, instant.action, State.REQUESTED)


def delete_pending(storage: Storage, config: TableConfig, instant: Instant) -> None:
    """Remove a pending instant from the timeline altogether (inflight first)."""
    for state in (State.INFLIGHT, State.REQUESTED):
        storage.delete(instant_file(config, Instant(instant.requested_time, instant.action, state)))
