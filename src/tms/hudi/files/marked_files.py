"""Which files an instant's markers may make us delete: only those the instant wrote.

A marker says "instant T may have written this file", and reconciliation and rollback delete
what markers name. Markers are not proof: timeline-server markers arrive over routes without
credentials, and direct markers are files anyone with write access to the table can create.
So a marked file is deleted only when the file itself says T wrote it:

- a base file names its writer: `<fileId>_<token>_<T>.<ext>`;
- a log file names its writer in layout 2 (the delta commit) but its slice's base instant in
  layout 1, and Hudi 0.x may append to a log file that earlier, committed instants wrote. The
  blocks say who wrote them (`INSTANT_TIME` in each header): the file is T's when it holds at
  least one well-framed block and every such block is T's. A file that is empty, unreadable
  or holds blocks of other instants is left alone (its blocks of T, if any, are dropped by
  readers once T leaves the timeline).

When the caller knows the file groups the plan or write names, the file must also lie in one
of them. Everything else is foreign: logged, counted and left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from tms.hudi.files.log_block import BlockType, HeaderKey
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.files.markers import Marker, list_markers
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.storage import Storage

__all__ = ["MarkedFiles", "delete_unreported_files", "sort_marked_files", "written_by"]

log = logging.getLogger(__name__)

SHOWN_FOREIGN = 5
"""Foreign markers named in the log line; the rest are counted."""


@dataclass(frozen=True)
class MarkedFiles:
    """An instant's markers, split by whether the instant wrote the file each names."""

    owned: tuple[Marker, ...]
    foreign: tuple[Marker, ...]

    @property
    def owned_paths(self) -> list[str]:
        return [m.data_file_path for m in self.owned]


def written_by(
    storage: Storage,
    marker: Marker,
    instant_time: str,
    file_groups: Collection[tuple[str, str]] | None = None,
) -> bool:
    """Whether the file `marker` names was written by `instant_time` (module docstring);
    `file_groups` ((partition, file id) pairs), when given, must hold its file group."""
    base = BaseFileName.parse(marker.file_name)
    log_file = None if base is not None else LogFileName.parse(marker.file_name)
    file_id = base.file_id if base is not None else log_file.file_id if log_file else None
    if file_id is None:
        return False
    if file_groups is not None and (marker.partition_path, file_id) not in file_groups:
        return False
    if base is not None:
        return base.instant_time == instant_time
    return _blocks_all_of(storage, marker.data_file_path, instant_time)


def _blocks_all_of(storage: Storage, path: str, instant_time: str) -> bool:
    try:
        blocks = read_log_blocks(storage.read_bytes(path))
    except FileNotFoundError:
        return False
    except Exception as exc:  # unreadable: never delete what cannot be judged
        log.warning("log file %s could not be read to judge its marker (%s)", path, exc)
        return False
    framed = [b for b in blocks if b.block_type is not BlockType.CORRUPTED]
    return bool(framed) and all(
        b.header.get(HeaderKey.INSTANT_TIME) == instant_time for b in framed
    )


def sort_marked_files(
    storage: Storage,
    instant_time: str,
    markers: Iterable[Marker],
    file_groups: Collection[tuple[str, str]] | None = None,
) -> MarkedFiles:
    """Split `markers` into the files `instant_time` wrote and foreign ones; the foreign are
    logged (a few by name) so an operator sees who planted them."""
    owned: list[Marker] = []
    foreign: list[Marker] = []
    for marker in markers:
        target = owned if written_by(storage, marker, instant_time, file_groups) else foreign
        target.append(marker)
    if foreign:
        shown = ", ".join(m.name for m in foreign[:SHOWN_FOREIGN])
        more = len(foreign) - SHOWN_FOREIGN
        log.warning(
            "instant %s of %s: %d marker(s) name files it did not write; left alone: %s%s",
            instant_time,
            storage.base_path,
            len(foreign),
            shown,
            f" and {more} more" if more > 0 else "",
        )
    return MarkedFiles(tuple(owned), tuple(foreign))


def delete_unreported_files(
    storage: Storage,
    instant_time: str,
    reported: set[str],
    file_groups: Collection[tuple[str, str]] | None = None,
) -> int:
    """Delete files a failed task attempt of `instant_time` wrote: a marker names them, no
    write stat does, and the file says the instant wrote it. What Hudi's reconciliation against
    markers does before an instant completes. Every marker is checked (by `list_markers`: none
    may name a file outside the table) before any file is deleted. Returns the number of
    foreign markers, whose files stay."""
    unreported = [
        m for m in list_markers(storage, instant_time) if m.data_file_path not in reported
    ]
    marked = sort_marked_files(storage, instant_time, unreported, file_groups)
    for path in marked.owned_paths:
        storage.delete(path)
    return len(marked.foreign)
