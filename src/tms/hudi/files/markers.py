"""Markers: one per data file a write creates, so a crashed write can be undone.

Direct markers are empty files,
`.hoodie/.temp/<instant>/<partition>/<dataFileName>.marker.<CREATE|MERGE|APPEND>`; markers a
timeline server keeps are lines of `MARKERS<n>` files in the instant's folder
(`tms.hudi.files.timeline_markers`). `list_markers` reads both.
"""

from __future__ import annotations

import enum
import posixpath
from dataclasses import dataclass

from tms.hudi.errors import UnsafePathError
from tms.hudi.files.timeline_markers import MARKERS_PREFIX, read_marker_files
from tms.hudi.storage import Storage
from tms.hudi.table_paths import TablePaths, check_relative

TEMP_FOLDER = ".hoodie/.temp"
MARKER_EXTENSION = ".marker."


class MarkerType(enum.StrEnum):
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


@dataclass(frozen=True)
class Marker:
    partition_path: str
    file_name: str
    marker_type: MarkerType

    @property
    def data_file_path(self) -> str:
        """The data file this marker stands for, relative to the base path."""
        if self.partition_path:
            return posixpath.join(self.partition_path, self.file_name)
        return self.file_name

    @property
    def name(self) -> str:
        """The marker's name as Hudi's writers send it to a timeline server and its
        `MARKERS<n>` files hold it: `<partition>/<dataFileName>.marker.<TYPE>`."""
        return f"{self.data_file_path}{MARKER_EXTENSION}{self.marker_type.value}"


def parse_marker_name(name: str, source: str) -> Marker:
    """A marker name (`Marker.name`), checked to name a data file inside the table: relative,
    no `..`, empty or `.` components, not in `.hoodie/`; `UnsafePathError` (naming `source`)
    otherwise, or when it is no marker name at all."""
    path, sep, kind = name.rpartition(MARKER_EXTENSION)
    if not sep or not path:
        raise UnsafePathError(source, name, "is not <partition>/<file>.marker.<type>")
    try:
        marker_type = MarkerType(kind)
    except ValueError:
        raise UnsafePathError(
            source, name, f"has marker type {kind!r}, not CREATE, MERGE or APPEND"
        ) from None
    check_relative(path, source, "marker", data=True, shown=name)
    partition, _, file_name = path.rpartition("/")
    return Marker(partition, file_name, marker_type)


def marker_dir(instant_time: str) -> str:
    return f"{TEMP_FOLDER}/{instant_time}"


def create_marker(storage: Storage, instant_time: str, marker: Marker) -> None:
    """Write the marker before the data file, so every file a crash leaves has one."""
    name = f"{marker.file_name}.marker.{marker.marker_type.value}"
    storage.write_bytes(posixpath.join(marker_dir(instant_time), marker.partition_path, name), b"")


def list_markers(storage: Storage, instant_time: str) -> list[Marker]:
    """The markers of an instant; `UnsafePathError` when one stands for a file outside the
    table (or in `.hoodie/`), since a rollback deletes what markers name."""
    root = marker_dir(instant_time)
    paths = TablePaths(storage, f"markers of instant {instant_time}")
    markers: list[Marker] = []
    for entry in storage.walk_files(root):
        name = entry.name
        if entry.path.count("/") == root.count("/") + 1 and name.startswith(MARKERS_PREFIX):
            continue  # timeline-server files, read below
        if MARKER_EXTENSION not in name:
            continue
        file_name, _, kind = name.rpartition(".marker.")
        partition = posixpath.relpath(posixpath.dirname(entry.path), root)
        partition = "" if partition == "." else partition
        try:
            marker = Marker(partition, file_name, MarkerType(kind))
        except ValueError:
            continue
        paths.relative(marker.data_file_path)
        markers.append(marker)
    # A name may stand in two `MARKERS<n>` files: a write whose answer was lost may have
    # landed while the server, not knowing, wrote the writer's retry of it into another.
    listed: set[str] = set()
    for names in read_marker_files(storage, instant_time).values():
        for line in names:
            if line in listed:
                continue
            listed.add(line)
            marker = parse_marker_name(line, f"markers of instant {instant_time}")
            paths.relative(marker.data_file_path)
            markers.append(marker)
    return markers


def delete_markers(storage: Storage, instant_time: str) -> None:
    storage.delete_dir(marker_dir(instant_time))
