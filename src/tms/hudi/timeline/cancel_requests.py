"""Cancellable plans (RFC-79): the flag in a plan, cancel requests, and the aborted state.

A plan is cancellable when its `extraMetadata` carries `cancellable=true` (the compaction
plan's and the clustering plan's own map; Hudi-written plans without it are not). A cancel
request is a file `.hoodie/.cancel/<instant>`: once there it is never taken back, and the
plan may only end aborted, never completed. Aborting writes `<instant>.<action>.aborted`
holding the plan, then removes the inflight and requested files: released Hudi readers and
writers, which do not know the state, then see no pending plan that would block their
updates, and tools that do can still read what was planned.

Readers and writers never see an aborted plan's data files: they are rolled back (deleted,
from their markers) before the instant is aborted, by `tms.services.plan_cancel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tms.hudi.errors import CancelRefusedError
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Instant, State, is_instant_time
from tms.hudi.timeline.timeline import Timeline, instant_key
from tms.hudi.timeline.transitions import instant_file

__all__ = [
    "CANCELLABLE_KEY",
    "CANCEL_FOLDER",
    "abort",
    "cancel_path",
    "cancel_requests",
    "clear_cancel_request",
    "is_cancel_requested",
    "is_cancellable",
    "plan_is_cancellable",
    "request_cancel",
    "with_cancellable",
]

CANCEL_FOLDER = ".hoodie/.cancel"
CANCELLABLE_KEY = "cancellable"
"""The key of the plan's `extraMetadata` that makes it cancellable (value `true`)."""


def cancel_path(instant_time: str) -> str:
    return f"{CANCEL_FOLDER}/{instant_time}"


def is_cancel_requested(storage: Storage, instant_time: str) -> bool:
    """Whether a cancel of the instant was requested: one GET (a missing object is one 404,
    where an existence check on an object store costs a HEAD and a LIST)."""
    try:
        storage.read_bytes(cancel_path(instant_time))
    except FileNotFoundError:
        return False
    return True


def cancel_requests(storage: Storage) -> list[str]:
    """The instants whose cancel was requested, oldest first (one LIST)."""
    names = (entry.name for entry in storage.list_dir(CANCEL_FOLDER) if not entry.is_dir)
    return sorted(name for name in names if is_instant_time(name))


def clear_cancel_request(storage: Storage, instant_time: str) -> None:
    storage.delete(cancel_path(instant_time))


def with_cancellable(extra_metadata: Mapping[str, str] | None, cancellable: bool) -> dict[str, str]:
    """A plan's `extraMetadata` saying whether it may be cancelled."""
    extra = dict(extra_metadata or {})
    if cancellable:
        extra[CANCELLABLE_KEY] = "true"
    else:
        extra.pop(CANCELLABLE_KEY, None)
    return extra


def is_cancellable(timeline: Timeline, instant: Instant) -> bool:
    return plan_is_cancellable(_plan(timeline, instant))


def plan_is_cancellable(plan: Mapping[str, Any] | None) -> bool:
    """Whether a compaction or clustering plan (already read) carries the flag."""
    flag = ((plan or {}).get("extraMetadata") or {}).get(CANCELLABLE_KEY) or ""
    return str(flag).strip().lower() == "true"


def request_cancel(storage: Storage, config: TableConfig, instant_time: str) -> bool:
    """Ask for a plan to be cancelled (RFC-79 `request_cancel`); True when this call wrote
    the request, False when it was already requested or the plan is aborted.

    `CancelRefusedError`, writing nothing: no such instant, a completed one, or a plan that
    is not cancellable. Callers hold the table lock, so that a plan cannot complete between
    the check and the request.
    """
    timeline = Timeline.load(storage, config)
    instant = timeline.get(instant_time)
    if instant is None:
        raise CancelRefusedError(f"no plan at instant {instant_time} on the timeline")
    if instant.is_aborted:
        return False
    if instant.is_completed:
        raise CancelRefusedError(
            f"{instant.action.value} {instant_time} has completed; a completed instant "
            "cannot be cancelled"
        )
    if not is_cancellable(timeline, instant):
        raise CancelRefusedError(
            f"{timeline.origin_action(instant).value} plan {instant_time} is not cancellable "
            f"(its plan's extraMetadata has no {CANCELLABLE_KEY}=true): it must run to "
            "completion"
        )
    try:
        storage.create_new(cancel_path(instant_time), b"")
    except FileExistsError:
        return False
    return True


def abort(storage: Storage, config: TableConfig, timeline: Timeline, instant: Instant) -> Instant:
    """Move a pending plan, whose data files are already rolled back, to the aborted state:
    the aborted file (holding the plan) first, so that a crash between the steps leaves an
    aborted instant, then the inflight and requested files, then the cancel request."""
    action = timeline.origin_action(instant)
    requested = Instant(instant.requested_time, action, State.REQUESTED)
    aborted = Instant(instant.requested_time, action, State.ABORTED)
    plan = b""
    if State.REQUESTED in timeline.files.get(instant_key(instant), {}):
        plan = timeline.read_instant(requested, State.REQUESTED)
    storage.write_bytes(instant_file(config, aborted), plan)
    for state in (State.INFLIGHT, State.REQUESTED):
        storage.delete(instant_file(config, Instant(instant.requested_time, action, state)))
    clear_cancel_request(storage, instant.requested_time)
    return aborted


def _plan(timeline: Timeline, instant: Instant) -> dict[str, Any] | None:
    """The compaction or clustering plan of an instant, None for other actions."""
    if timeline.is_compaction(instant):
        return timeline.compaction_plan(instant)
    if timeline.is_clustering(instant):
        return timeline.clustering_plan(instant)
    return None
