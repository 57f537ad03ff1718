"""The timeline a Hudi file-system view works on, and its hash, as Hudi computes them.

Hudi's remote view (`RemoteHoodieTableFileSystemView`) sends with every request the last
instant of the client's timeline (`lastinstantts`) and that timeline's hash
(`timelinehash`); its server answers only from a view at least as fresh. Both sides hash
the active timeline filtered to completed instants and pending (log) compactions: SHA-256
over `<requested time>_<action>_<STATE>` of each instant in timeline order, in lowercase
hex (`BaseHoodieTimeline.computeTimelineHash`). An instant is in its furthest state, its
action the one its instant file names (a completed compaction is a `commit`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from tms.hudi.timeline.instant import COMPLETED_ACTION, Action, Instant, State
from tms.hudi.timeline.timeline import Timeline

__all__ = [
    "INVALID_INSTANT_TS",
    "contains_or_before_start",
    "instant_dto",
    "timeline_dto",
    "timeline_hash",
    "visible_instants",
]

INVALID_INSTANT_TS = "0"
"""`HoodieTimeline.INVALID_INSTANT_TS`: what the server assumes when `lastinstantts` is absent."""
_PENDING_VISIBLE = frozenset({Action.COMPACTION, Action.LOG_COMPACTION})
"""Pending actions the view's timeline keeps (`filterCompletedOrMajorOrMinorCompactionInstants`)."""
_STATE_NAMES = {
    State.REQUESTED: "REQUESTED",
    State.INFLIGHT: "INFLIGHT",
    State.COMPLETED: "COMPLETED",
}


def _order(instant: Instant) -> tuple[str, str, int]:
    """`HoodieInstant`'s order: requested time, then comparable action, then state."""
    comparable = COMPLETED_ACTION.get(instant.action, instant.action)
    return instant.requested_time, comparable.value, int(instant.state)


def visible_instants(timeline: Timeline) -> list[Instant]:
    """Completed instants and pending (log) compactions, in Hudi's timeline order; aborted
    instants (RFC-79, unknown to released Hudi) are left out."""
    kept = [
        i
        for i in timeline.instants
        if i.is_completed or (i.is_pending and i.action in _PENDING_VISIBLE)
    ]
    return sorted(kept, key=_order)


def timeline_hash(instants: Iterable[Instant]) -> str:
    digest = hashlib.sha256()
    for instant in instants:
        digest.update(
            f"{instant.requested_time}_{instant.action.value}_{_STATE_NAMES[instant.state]}".encode()
        )
    return digest.hexdigest()


def contains_or_before_start(instants: Sequence[Instant], ts: str) -> bool:
    """`HoodieTimeline.containsOrBeforeTimelineStarts`: an instant of that time is on the
    timeline, or the time is older than its first instant (archived)."""
    if any(i.requested_time == ts for i in instants):
        return True
    return bool(instants) and ts < instants[0].requested_time


def instant_dto(instant: Instant) -> dict[str, Any]:
    """`InstantDTO`: `action`, `ts` (requested time), `state` (the enum's name), and the
    fields Hudi 1.x added, which its client builds the instant from: `requestedTime` and
    `completionTime` (null while pending). Hudi 0.x's client ignores the two."""
    return {
        "action": instant.action.value,
        "ts": instant.requested_time,
        "state": _STATE_NAMES[instant.state],
        "requestedTime": instant.requested_time,
        "completionTime": instant.completion_time if instant.is_completed else None,
    }


def timeline_dto(instants: Iterable[Instant]) -> dict[str, Any]:
    """`TimelineDTO`: `{"instants": [InstantDTO…]}`."""
    return {"instants": [instant_dto(i) for i in instants]}


WRITE_ACTIONS = frozenset(
    {
        Action.COMMIT,
        Action.DELTA_COMMIT,
        Action.COMPACTION,
        Action.LOG_COMPACTION,
        Action.REPLACE_COMMIT,
        Action.CLUSTERING,
    }
)
"""`HoodieTimeline.getWriteTimeline`'s actions: the timeline a file group carries."""


def write_instants(instants: Iterable[Instant]) -> list[Instant]:
    return [i for i in instants if i.action in WRITE_ACTIONS]
