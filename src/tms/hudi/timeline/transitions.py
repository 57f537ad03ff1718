"""Moving instants through their states on storage: requested → inflight → completed.

Both layouts keep the files of earlier states beside the completed one, as Hudi does; what
differs (file names, commit metadata encoding) is `tms.hudi.timeline.layout`'s. Instant and
completion times come from one clock and are unique and increasing across the timeline: a
new time is later than every requested and completion time already there, as Hudi 1.x's
time generator guarantees under its lock.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import (
    Action,
    Instant,
    State,
    format_instant_time,
    is_instant_time,
    parse_instant_file,
)
from tms.hudi.timeline.layout import TimelineLayout

Content = bytes | CommitMetadata
"""What an instant file holds: ready bytes, or commit metadata the layout encodes."""


def latest_time(instants: Iterable[Instant]) -> str:
    """The latest requested or completion time among instants ('' for none)."""
    return max(
        (t for i in instants for t in (i.requested_time, i.completion_time or "")), default=""
    )


def next_time(after: str) -> str:
    """The current time, once it is later than `after` (times are unique)."""
    while True:
        candidate = format_instant_time(datetime.now(UTC))
        if candidate > after:
            return candidate
        time.sleep(0.001)


def new_instant_time(existing: Iterable[Instant]) -> str:
    """A new instant time after every instant on the timeline, requested or completed."""
    return next_time(latest_time(existing))


def plan_instant_time(existing: Sequence[Instant], wanted: str | None) -> str:
    """The instant of a new plan: `wanted`, which must be an instant time later than every
    instant requested on the timeline (`ValueError` otherwise), or a new one when None."""
    if wanted is None:
        return new_instant_time(existing)
    if not is_instant_time(wanted):
        raise ValueError(f"instant time {wanted!r} is not yyyyMMddHHmmss[SSS]")
    latest = max((i.requested_time for i in existing), default="")
    if wanted <= latest:
        raise ValueError(f"instant time {wanted} must be after the latest instant {latest}")
    return wanted


def instant_file(config: TableConfig, instant: Instant) -> str:
    return TimelineLayout.of(config).path(instant)


def request(
    storage: Storage, config: TableConfig, instant_time: str, action: Action, content: Content = b""
) -> Instant:
    layout = TimelineLayout.of(config)
    instant = Instant(instant_time, action, State.REQUESTED)
    storage.write_bytes(layout.path(instant), _encode(layout, content))
    return instant


def transition(
    storage: Storage, config: TableConfig, instant: Instant, state: State, content: Content = b""
) -> Instant:
    """Write the file of the next state; a completed instant gets a completion time later
    than every time on the timeline (layout 2 names its file by it)."""
    layout = TimelineLayout.of(config)
    completion = (
        next_time(latest_time(_instants_on_storage(storage, layout)))
        if state is State.COMPLETED
        else None
    )
    moved = instant.with_state(state, completion)
    storage.write_bytes(layout.path(moved), _encode(layout, content))
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


def _encode(layout: TimelineLayout, content: Content) -> bytes:
    if isinstance(content, CommitMetadata):
        return layout.commit_metadata_bytes(content)
    return content


def _instants_on_storage(storage: Storage, layout: TimelineLayout) -> list[Instant]:
    if not storage.exists(layout.folder):
        return []
    found = (parse_instant_file(e.name) for e in storage.list_dir(layout.folder) if not e.is_dir)
    return [i for i in found if i is not None]
