"""The archived timeline of layout 2: completed instants Hudi moved out of the active timeline.

Hudi 1.x archives into an LSM tree under `.hoodie/timeline/history/` (`LSMTimeline`):
Parquet files `<min>_<max>_<layer>.parquet` holding one row per instant (`instantTime`,
`completionTime`, `action`, metadata, plan), a manifest `manifest_<N>` per snapshot version
listing the files that make it up (JSON `{"files": [{"fileName", "fileLen"}]}`), and
`_version_` naming the latest version. Readers take the latest version's manifest only: files
it does not list are compacted into others or not yet committed.

Read only: archiving is left to Hudi's writers. Layout 1 keeps its archive in another format
(`.hoodie/archived/`), not read here.
"""

from __future__ import annotations

import functools
import io
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from tms.hudi.errors import HudiError, UnsafePathError
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, Instant, State

log = logging.getLogger(__name__)

HISTORY_PATH = "hoodie.timeline.history.path"
DEFAULT_HISTORY_FOLDER = "history"
VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
TEMP_SUFFIX = ".tmp"
_MANIFEST = re.compile(r"^manifest_(\d+)$")
_LSM_FILE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
_SAFE_FOLDER = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
COLUMNS = ("instantTime", "completionTime", "action")


class ArchivedTimelineError(HudiError):
    """The archived timeline cannot be read: a manifest or file is missing or malformed."""


def history_path(config: TableConfig) -> str:
    """The history folder relative to the base path (`hoodie.timeline.history.path`, relative
    to the timeline folder); a value that would leave it is refused."""
    folder = config.get(HISTORY_PATH) or DEFAULT_HISTORY_FOLDER
    if not _SAFE_FOLDER.match(folder) or any(part in (".", "..") for part in folder.split("/")):
        raise UnsafePathError(
            f"hoodie.properties {HISTORY_PATH}", folder, "is not a folder inside the timeline"
        )
    return f"{config.timeline_path}/{folder}"


@dataclass(frozen=True)
class ArchivedTimeline:
    """Archived instants of the latest snapshot version, oldest requested time first."""

    version: int
    """The snapshot version read; -1 when nothing was ever archived."""
    files: tuple[str, ...]
    instants: tuple[Instant, ...]

    @classmethod
    def empty(cls) -> ArchivedTimeline:
        return cls(-1, (), ())

    @classmethod
    def load(cls, storage: Storage, config: TableConfig) -> ArchivedTimeline:
        if config.timeline_layout_version < 2:
            return cls.empty()
        folder = history_path(config)
        if not storage.exists(folder):
            return cls.empty()
        version = latest_version(storage, folder)
        if version < 0:
            return cls.empty()
        files = manifest_files(storage, folder, version)
        instants: dict[tuple[str, Action], Instant] = {}
        for name in files:
            for instant in _read_lsm_file(storage, f"{folder}/{name}"):
                instants.setdefault((instant.requested_time, instant.action), instant)
        ordered = sorted(instants.values(), key=lambda i: (i.requested_time, i.action.value))
        return cls(version, files, tuple(ordered))

    def get(self, requested_time: str) -> Instant | None:
        return self._by_time.get(requested_time)

    @functools.cached_property
    def _by_time(self) -> dict[str, Instant]:
        return {i.requested_time: i for i in self.instants}

    def completion_time(self, requested_time: str) -> str | None:
        instant = self.get(requested_time)
        return instant.completion_time if instant else None

    def describe(self) -> list[dict[str, Any]]:
        return [
            {
                "instant": i.requested_time,
                "action": i.action.value,
                "completion_time": i.completion_time,
            }
            for i in self.instants
        ]


def latest_version(storage: Storage, folder: str) -> int:
    """The version `_version_` names; the highest manifest when it is missing or unreadable."""
    path = f"{folder}/{VERSION_FILE}"
    if storage.exists(path):
        text = storage.read_bytes(path).decode("utf-8", errors="replace").strip()
        if text.isdigit():
            return int(text)
        log.warning("archived timeline: %s holds %r, not a version; listing manifests", path, text)
    versions = [
        int(match.group(1))
        for entry in storage.list_dir(folder)
        if not entry.is_dir and (match := _MANIFEST.match(entry.name))
    ]
    return max(versions, default=-1)


def manifest_files(storage: Storage, folder: str, version: int) -> tuple[str, ...]:
    """The LSM files of one snapshot version, as its manifest lists them."""
    path = f"{folder}/{MANIFEST_PREFIX}{version}"
    if not storage.exists(path):
        raise ArchivedTimelineError(f"archived timeline: manifest {path} is missing")
    try:
        entries = json.loads(storage.read_bytes(path) or b"{}").get("files") or []
        names = [str(entry["fileName"]) for entry in entries]
    except (ValueError, AttributeError, TypeError, KeyError) as exc:
        raise ArchivedTimelineError(f"archived timeline: manifest {path} is malformed") from exc
    for name in names:
        if not _LSM_FILE.match(name):
            raise UnsafePathError(path, name, "is not an LSM timeline file of this folder")
    return tuple(sorted(names))


def _read_lsm_file(storage: Storage, path: str) -> list[Instant]:
    if not storage.exists(path):
        raise ArchivedTimelineError(f"archived timeline: {path} is listed but missing")
    try:
        table = pq.read_table(io.BytesIO(storage.read_bytes(path)), columns=list(COLUMNS))
    except (OSError, ValueError, KeyError) as exc:
        log.warning("archived timeline: cannot read %s: %s", path, exc)
        raise ArchivedTimelineError(f"archived timeline: {path} is not readable") from exc
    instants: list[Instant] = []
    for row in table.to_pylist():
        requested, completed, action_name = (row[c] for c in COLUMNS)
        action = _action(action_name)
        if not requested or action is None:
            log.warning("archived timeline: skipping %r %r in %s", requested, action_name, path)
            continue
        instants.append(Instant(str(requested), action, State.COMPLETED, completed or None))
    return instants


def _action(value: object) -> Action | None:
    try:
        return Action(str(value))
    except ValueError:
        return None
