"""Completion times of the view's instants, as Hudi 1.x's timeline server reports them.

Hudi 1.x's `InstantDTO` carries `completionTime`, and its client builds each instant from it.
On timeline layout 2 the completed instant file names it. On layout 1 (table version 6) no
file does, and Hudi 1.x takes the completed instant file's modification time, formatted as
an instant time in the server's local time zone (`InstantGeneratorV1.createNewInstant`,
`HoodieInstantTimeGenerator.formatDate`). The timeline's own listing is kept for that, so
the times cost no storage call of their own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from tms.hudi.storage import FileInfo, Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State, parse_instant_file
from tms.hudi.timeline.timeline import Timeline

__all__ = ["CompletionTimes", "instant_time_of", "load_timeline", "with_completion_times"]

CompletionTimes = Mapping[tuple[str, Action], str]
"""Per completed instant (requested time, completed action), its completion time."""
_FLOAT_SLACK_MS = 3e-4
"""A file time read as float seconds may fall a hair below the millisecond Java reads."""


class _RecordingStorage:
    """The table's storage, keeping the entries of the folders it lists."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self.listed: dict[str, list[FileInfo]] = {}

    def list_dir(self, path: str) -> list[FileInfo]:
        entries = self._storage.list_dir(path)
        self.listed[path] = entries
        return entries

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)


def instant_time_of(modified: float) -> str:
    """A modification time (epoch seconds) as Hudi formats a date: `yyyyMMddHHmmssSSS`, local
    time, to the millisecond Java reads (truncated)."""
    millis = math.floor(modified * 1000 + _FLOAT_SLACK_MS)
    moment = datetime.fromtimestamp(millis // 1000)
    return moment.strftime("%Y%m%d%H%M%S") + f"{millis % 1000:03d}"


def load_timeline(table: HudiTable) -> tuple[Timeline, CompletionTimes]:
    """The table's timeline, and on layout 1 the completion times Hudi 1.x gives it."""
    recorder = _RecordingStorage(table.storage)
    timeline = Timeline.load(cast(Storage, recorder), table.config)
    timeline = dataclasses.replace(timeline, storage=table.storage)
    if table.config.timeline_layout_version >= 2:
        return timeline, {}
    times: dict[tuple[str, Action], str] = {}
    for entry in recorder.listed.get(table.config.timeline_path, []):
        instant = parse_instant_file(entry.name)
        if instant is not None and instant.state is State.COMPLETED and not entry.is_dir:
            times[(instant.requested_time, instant.action)] = instant_time_of(entry.modified)
    return timeline, times


def with_completion_times(instants: list[Instant], times: CompletionTimes) -> list[Instant]:
    """`instants`, completed ones without a completion time given theirs from `times`."""
    if not times:
        return instants
    out = []
    for instant in instants:
        found = times.get((instant.requested_time, instant.action))
        if instant.is_completed and instant.completion_time is None and found is not None:
            instant = dataclasses.replace(instant, completion_time=found)
        out.append(instant)
    return out
