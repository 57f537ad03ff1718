"""Markers as Hudi's timeline server stores them (`MarkerType.TIMELINE_SERVER_BASED`).

The server batches its writers' marker requests into a few files per instant instead of one
empty file per data file:

    .hoodie/.temp/<instant>/MARKERS.type   "TIMELINE_SERVER_BASED" (written once, first)
    .hoodie/.temp/<instant>/MARKERS<n>     one marker name a line, n in 0..threads-1

A marker name is `<partition>/<dataFileName>.marker.<CREATE|MERGE|APPEND>` (no partition
for a non-partitioned table), as `WriteMarkers` names it. Hudi rewrites each `MARKERS<n>` file
whole with every marker it holds; we append a batch where storage can, and elsewhere start a
new `MARKERS<n>` once one is large, so a batch never rewrites much. One writer at a time
writes a file. Hudi's `MarkerUtils` reads the
lines of every `MARKERS*` file but `MARKERS.type`, which is how a writer falling back to
storage, or Hudi's rollback, finds them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from tms.hudi.storage import Storage

__all__ = [
    "MARKERS_PREFIX",
    "MARKER_TYPE_FILE",
    "TIMELINE_SERVER_BASED",
    "append_marker_file",
    "marker_file_path",
    "marker_files_of",
    "read_marker_files",
    "read_marker_type",
    "write_marker_file",
    "write_marker_type",
]

MARKERS_PREFIX = "MARKERS"
MARKER_TYPE_FILE = "MARKERS.type"
TIMELINE_SERVER_BASED = "TIMELINE_SERVER_BASED"
_MARKERS_FILE = re.compile(r"^MARKERS(\d{1,6})$")


def _dir(instant_time: str) -> str:
    return f".hoodie/.temp/{instant_time}"


def marker_file_index(name: str) -> int | None:
    """`MARKERS3` → 3; None for `MARKERS.type` and anything else."""
    match = _MARKERS_FILE.match(name)
    return int(match.group(1)) if match else None


def read_marker_type(storage: Storage, instant_time: str) -> str | None:
    """What `MARKERS.type` says (None without one: direct markers)."""
    path = posixpath.join(_dir(instant_time), MARKER_TYPE_FILE)
    try:
        text = storage.read_bytes(path).decode("utf-8").strip()
    except FileNotFoundError:
        return None
    return text or None


def write_marker_type(storage: Storage, instant_time: str) -> None:
    """`MARKERS.type` before the first `MARKERS<n>`, as Hudi's `MarkerDirState` writes it
    (kept when it exists: Hudi never overwrites it)."""
    path = posixpath.join(_dir(instant_time), MARKER_TYPE_FILE)
    if not storage.exists(path):
        storage.write_bytes(path, TIMELINE_SERVER_BASED.encode("utf-8"))


def marker_files_of(storage: Storage, instant_time: str) -> list[tuple[int, str]]:
    """The `MARKERS<n>` files of an instant as (n, relative path), by n."""
    found = []
    for entry in storage.list_dir(_dir(instant_time)):
        index = marker_file_index(entry.name)
        if index is not None and not entry.is_dir:
            found.append((index, posixpath.join(_dir(instant_time), entry.name)))
    return sorted(found)


def read_marker_files(storage: Storage, instant_time: str) -> dict[int, list[str]]:
    """Every `MARKERS<n>` file's marker names, in file order (empty lines skipped, as
    Hudi's reader yields none from a trailing newline)."""
    markers: dict[int, list[str]] = {}
    for index, path in marker_files_of(storage, instant_time):
        try:
            text = storage.read_bytes(path).decode("utf-8")
        except FileNotFoundError:  # deleted while listed
            continue
        lines = text.split("\n")
        lines.pop()  # after the last newline: empty, or a line an interrupted append tore
        markers[index] = [line for line in lines if line]
    return markers


def marker_lines(names: Iterable[str]) -> bytes:
    """Marker names as `MARKERS<n>` holds them: one a line, each ending in a newline."""
    return "".join(f"{name}\n" for name in names).encode("utf-8")


def write_marker_file(
    storage: Storage, instant_time: str, index: int, names: Iterable[str]
) -> None:
    """Rewrite `MARKERS<index>` whole with `names`."""
    storage.write_bytes(marker_file_path(instant_time, index), marker_lines(names))


def append_marker_file(
    storage: Storage, instant_time: str, index: int, names: Iterable[str]
) -> None:
    """Add `names` at the end of `MARKERS<index>` (storage that `appends` only)."""
    storage.append_bytes(marker_file_path(instant_time, index), marker_lines(names))


def marker_file_path(instant_time: str, index: int) -> str:
    return posixpath.join(_dir(instant_time), f"{MARKERS_PREFIX}{index}")
