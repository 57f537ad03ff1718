"""Instants: one action at one instant time, in one state, and their file names.

Layout 1 (table versions 6 and 7) keeps every instant file directly in `.hoodie/`; layout 2
(versions 8 and 9) keeps them in `.hoodie/timeline/` and names a completed instant by its
requested and completion times.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


class State(enum.IntEnum):
    """Ordered so that the furthest state of an instant is the maximum.

    `ABORTED` is RFC-79's terminal state of a cancelled plan: never completed, no longer
    pending. Released Hudi has no such state; its readers skip the file."""

    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2
    ABORTED = 3

    @property
    def label(self) -> str:
        return self.name


class Action(enum.StrEnum):
    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    REPLACE_COMMIT = "replacecommit"
    CLUSTERING = "clustering"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    INDEXING = "indexing"
    SCHEMA_COMMIT = "schemacommit"


WRITE_ACTIONS = frozenset(
    {
        Action.COMMIT,
        Action.DELTA_COMMIT,
        Action.REPLACE_COMMIT,
        Action.COMPACTION,
        Action.LOG_COMPACTION,
        Action.CLUSTERING,
    }
)
"""Actions that write data files."""

COMPLETED_ACTION = {
    Action.COMPACTION: Action.COMMIT,
    Action.LOG_COMPACTION: Action.DELTA_COMMIT,
    Action.CLUSTERING: Action.REPLACE_COMMIT,
}
"""Pending actions whose completed instant carries another action's name."""

INSTANT_TIME_FORMAT = "%Y%m%d%H%M%S"
_INSTANT_TIME = re.compile(r"[0-9]{14}(?:[0-9]{3})?")
"""ASCII digits only, matched on the whole string (`$` would let a trailing newline in)."""
_LAYOUT1 = re.compile(r"^(\d{14,20})\.?(.*)$")
_LAYOUT2_COMPLETED = re.compile(r"^(\d{14,20})_(\d{14,17})\.([a-z]+)$")


def is_instant_time(value: str) -> bool:
    return _INSTANT_TIME.fullmatch(value) is not None


def format_instant_time(moment: datetime) -> str:
    """`yyyyMMddHHmmssSSS` in UTC."""
    moment = moment.astimezone(UTC)
    return moment.strftime(INSTANT_TIME_FORMAT) + f"{moment.microsecond // 1000:03d}"


def parse_instant_time(value: str) -> datetime:
    """An instant time (`yyyyMMddHHmmss[SSS]`, UTC) as a moment; `ValueError` for another
    string."""
    if not is_instant_time(value):
        raise ValueError(f"{value!r} is not an instant time (yyyyMMddHHmmss[SSS])")
    moment = datetime.strptime(value[:14], INSTANT_TIME_FORMAT).replace(tzinfo=UTC)
    return moment + timedelta(milliseconds=int(value[14:17] or 0))


@dataclass(frozen=True, order=True)
class Instant:
    """One instant of the timeline, in its furthest state."""

    requested_time: str
    action: Action
    state: State
    completion_time: str | None = None

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state in (State.REQUESTED, State.INFLIGHT)

    @property
    def is_aborted(self) -> bool:
        return self.state is State.ABORTED

    def with_state(self, state: State, completion_time: str | None = None) -> Instant:
        """This instant moved to another state (a completed one takes its completed action)."""
        action = (
            COMPLETED_ACTION.get(self.action, self.action)
            if state is State.COMPLETED
            else (self.action)
        )
        return Instant(self.requested_time, action, state, completion_time)

    def file_name(self, layout_version: int = 1) -> str:
        """The instant file that records this state in the given timeline layout."""
        return instant_file_name(self, layout_version)

    def __str__(self) -> str:
        done = f" completed {self.completion_time}" if self.completion_time else ""
        return f"[{self.requested_time}__{self.action.value}__{self.state.name}{done}]"


def instant_file_name(instant: Instant, layout_version: int = 1) -> str:
    """The file that records an instant's state, as the layout names it."""
    ts, action = instant.requested_time, instant.action.value
    if instant.state is State.REQUESTED:
        return f"{ts}.{action}.requested"
    if instant.state is State.INFLIGHT:
        return f"{ts}.inflight" if instant.action is Action.COMMIT else f"{ts}.{action}.inflight"
    if instant.state is State.ABORTED:
        return f"{ts}.{action}.aborted"
    if layout_version >= 2:
        if instant.completion_time is None:
            raise ValueError(f"completed instant {ts} needs a completion time in layout 2")
        return f"{ts}_{instant.completion_time}.{action}"
    return f"{ts}.{action}"


def parse_instant_file(name: str) -> Instant | None:
    """The instant an instant file records, or None for anything else in the folder."""
    match = _LAYOUT2_COMPLETED.match(name)
    if match:
        action = _action(match.group(3))
        if action is None:
            return None
        return Instant(match.group(1), action, State.COMPLETED, match.group(2))
    match = _LAYOUT1.match(name)
    if not match:
        return None
    ts, rest = match.group(1), match.group(2)
    if rest == "inflight":
        return Instant(ts, Action.COMMIT, State.INFLIGHT)
    parts = rest.split(".")
    if len(parts) == 1:
        action = _action(parts[0])
        return Instant(ts, action, State.COMPLETED) if action else None
    if len(parts) == 2 and parts[1] in _PENDING_OR_ABORTED:
        action = _action(parts[0])
        if action is None:
            return None
        return Instant(ts, action, _PENDING_OR_ABORTED[parts[1]])
    return None


_PENDING_OR_ABORTED = {
    "requested": State.REQUESTED,
    "inflight": State.INFLIGHT,
    "aborted": State.ABORTED,
}
"""The suffixes of instant files that are not completed ones."""


def _action(value: str) -> Action | None:
    try:
        return Action(value)
    except ValueError:
        return None
