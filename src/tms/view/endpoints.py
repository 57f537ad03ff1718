"""Hudi's remote file-system view endpoints (`RemoteHoodieTableFileSystemView`'s URLs under
`/v1/hoodie/view/`), each answered from a snapshot as Hudi's `AbstractTableFileSystemView`
answers the same call.

An endpoint declares its query parameters (mandatory ones are refused when missing, as
Hudi's handlers refuse them), whether the server first checks the client's
`lastinstantts`/`timelinehash` (Hudi's `performRefreshCheck`), and how many partitions its
answer covers (the listings a client reading storage itself would have made).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tms.hudi.files.fs_view import FileGroup, FileSlice
from tms.view.dto import DtoWriter, clustering_op, compaction_op, last_instant
from tms.view.snapshot import Snapshot, sorted_groups
from tms.view.visible_timeline import timeline_dto

__all__ = ["ENDPOINTS", "BadParameter", "Endpoint", "MissingParameter", "Params", "check_values"]

BASEPATH = "basepath"
PARTITION = "partition"
FILEID = "fileid"
MAX_INSTANT = "maxinstant"
MIN_INSTANT = "mininstant"
INSTANT = "instant"
INSTANTS = "instants"
INCLUDE_PENDING = "includependingcompaction"
LAST_INSTANT_TS = "lastinstantts"
TIMELINE_HASH = "timelinehash"
REFRESH_OFF = "refreshoff"
_INSTANT_PARAMS = frozenset({MAX_INSTANT, MIN_INSTANT, INSTANT, LAST_INSTANT_TS})


class BadParameter(Exception):
    """A query parameter the view cannot answer: absent when mandatory, or malformed."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name = name


class MissingParameter(BadParameter):
    """A mandatory query parameter is absent."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "the query parameter is required")


MAX_VALUE_CHARS = 4096
"""Longest value of any parameter but `instants` (a base path or partition path is far
shorter; the server's request line is bounded anyway)."""
MAX_INSTANTS = 1024
_INSTANT = re.compile(r"[0-9]{1,32}")
"""Hudi's instant times are digits (`yyyyMMddHHmmss[SSS]`, and `0`, `00000000000001`...)."""
_FILE_ID = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_HASH = re.compile(r"[0-9A-Fa-f]{0,128}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _partition_problem(value: str) -> str | None:
    """What makes `value` no partition path of a table: Hudi's are relative, '/'-separated
    and never step out of the table."""
    if value.startswith("/"):
        return "must be relative to the table"
    if any(part in (".", "..") for part in value.rstrip("/").split("/")):
        return "must not hold '.' or '..' segments"
    return None


def check_values(query: Mapping[str, str]) -> None:
    """Refuse a malformed value of any parameter the view reads, before any work: Hudi's
    client sends instants as digits, file ids as names and partitions inside the table,
    and the server answers nothing else (the client then reads storage itself)."""
    for name, value in query.items():
        if name == INSTANTS:
            items = value.split(",")
            if len(items) > MAX_INSTANTS:
                raise BadParameter(name, f"at most {MAX_INSTANTS} instants")
            if not all(_INSTANT.fullmatch(x) for x in items):
                raise BadParameter(name, "a comma-separated list of instant times (digits)")
            continue
        if len(value) > MAX_VALUE_CHARS:
            raise BadParameter(name, f"at most {MAX_VALUE_CHARS} characters")
        if _CONTROL.search(value):
            raise BadParameter(name, "must not hold control characters")
        if name in _INSTANT_PARAMS and not _INSTANT.fullmatch(value):
            raise BadParameter(name, "an instant time (digits)")
        if name == FILEID and (not _FILE_ID.fullmatch(value) or not value.strip(".")):
            raise BadParameter(name, "a file id (letters, digits, '_', '-', '.')")
        if name == TIMELINE_HASH and not _HASH.fullmatch(value):
            raise BadParameter(name, "a timeline hash (hexadecimal)")
        if name == PARTITION:
            problem = _partition_problem(value)
            if problem is not None:
                raise BadParameter(name, problem)


@dataclass(frozen=True)
class Params:
    """The request's query parameters (the first value of each)."""

    values: Mapping[str, str]

    def required(self, name: str) -> str:
        value = self.values.get(name)
        if value is None:
            raise MissingParameter(name)
        return value

    def optional(self, name: str, default: str = "") -> str:
        return self.values.get(name, default)

    @property
    def partition(self) -> str:
        """`formatPartitionKey`: a trailing '/' is not part of the partition path."""
        value = self.optional(PARTITION)
        return value[:-1] if value.endswith("/") else value

    def instants(self) -> list[str]:
        return self.required(INSTANTS).split(",")


Answer = Callable[[Snapshot, DtoWriter, Params], Any]
Covered = Callable[[Snapshot, Params], int]


@dataclass(frozen=True)
class Endpoint:
    name: str
    """Metric label: Hudi's `metricsRegistry` name of the call."""
    method: str
    refresh_check: bool
    answer: Answer
    covered: Covered


def _one(snapshot: Snapshot, params: Params) -> int:
    return 1


def _all(snapshot: Snapshot, params: Params) -> int:
    return len(snapshot.groups)


def _none(snapshot: Snapshot, params: Params) -> int:
    return 0


# File slices ------------------------------------------------------------------------------


def _latest_slices(s: Snapshot, partition: str | None) -> list[FileSlice]:
    out = []
    for group in s.live_groups(partition):
        piece = s.without_pending_base(group.latest_slice, keep_empty=True)
        if piece is not None:
            out.append(piece)
    return out


def latest_slices(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.file_slices(_latest_slices(s, p.partition))


def latest_slice(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    file_id = p.required(FILEID)
    return w.file_slices(x for x in _latest_slices(s, p.partition) if x.file_id == file_id)


def uncompacted_slices(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    out = []
    for group in s.live_groups(p.partition):
        compaction = s.compaction_of(group)
        piece = group.latest_slice if compaction is None else s.slice_before(group, compaction)
        if piece is not None:
            out.append(piece)
    return w.file_slices(out)


def all_slices(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.file_slices(x for g in s.live_groups(p.partition) for x in s.slices(g))


def _slices_before_or_on(
    s: Snapshot, partition: str, max_instant: str, include_pending: bool
) -> list[FileSlice]:
    out: list[FileSlice] = []
    for group in s.file_groups(partition):
        if s.replaced_before_or_on(group, max_instant):
            continue
        candidates = s.slices_before_or_on(group, max_instant)
        if include_pending:
            kept = (s.without_pending_base(x, keep_empty=False) for x in candidates)
            found = next((x for x in kept if x is not None), None)
        elif s.compaction_of(group) is not None:
            found = None
        else:
            found = next((x for x in candidates if x.base_file or x.log_files), None)
        if found is not None:
            out.append(found)
    return out


def slices_before_or_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    max_instant = p.required(MAX_INSTANT)
    include = p.required(INCLUDE_PENDING).lower() == "true"
    return w.file_slices(_slices_before_or_on(s, p.partition, max_instant, include))


def all_slices_before_or_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    """`getAllLatestFileSlicesBeforeOrOn`: every partition's, pending compactions included."""
    max_instant = p.required(MAX_INSTANT)
    return {
        part: w.file_slices(_slices_before_or_on(s, part, max_instant, include_pending=True))
        for part in s.partitions()
    }


def _merged_before_or_on(s: Snapshot, groups: list[FileGroup], max_instant: str) -> list[FileSlice]:
    out = []
    for group in groups:
        if s.replaced_before_or_on(group, max_instant):
            continue
        candidates = s.slices_before_or_on(group, max_instant)
        if candidates:
            out.append(s.merged(group, candidates[0]))
    return out


def merged_before_or_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    max_instant = p.required(MAX_INSTANT)
    return w.file_slices(_merged_before_or_on(s, s.file_groups(p.partition), max_instant))


def merged_slice_before_or_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    max_instant, file_id = p.required(MAX_INSTANT), p.required(FILEID)
    groups = [g for g in s.file_groups(p.partition) if g.file_id == file_id]
    return w.file_slices(_merged_before_or_on(s, groups, max_instant))


def _in_range(
    s: Snapshot, p: Params, pieces: Callable[[FileGroup], Iterable[Any]], at: Callable[[Any], str]
) -> list[Any]:
    """Per file group not replaced by the newest of `instants`, its newest piece (slice or
    base file) whose instant `at` is one of them."""
    wanted = set(p.instants())
    newest = max(wanted)
    out = []
    for group in s.file_groups(None):
        if s.replaced_before_or_on(group, newest):
            continue
        found = next((x for x in pieces(group) if at(x) in wanted), None)
        if found is not None:
            out.append(found)
    return out


def slices_in_range(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.file_slices(_in_range(s, p, s.slices, lambda x: x.base_instant_time))


# Base files -------------------------------------------------------------------------------


def latest_base_files(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.base_files(_latest_bases(s, p.partition))


def _latest_bases(s: Snapshot, partition: str | None) -> list[Any]:
    found = (next(iter(s.base_files(g)), None) for g in s.live_groups(partition))
    return [b for b in found if b is not None]


def latest_base_file(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    file_id = p.required(FILEID)
    return w.base_files(b for b in _latest_bases(s, p.partition) if b.name.file_id == file_id)


def all_latest_base_files(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.base_files(_latest_bases(s, None))


def _bases_before_or_on(s: Snapshot, partition: str, max_instant: str) -> list[Any]:
    out = []
    for group in s.file_groups(partition):
        if s.replaced_before_or_on(group, max_instant):
            continue
        found = next((b for b in s.base_files(group) if b.name.instant_time <= max_instant), None)
        if found is not None:
            out.append(found)
    return out


def base_files_before_or_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.base_files(_bases_before_or_on(s, p.partition, p.required(MAX_INSTANT)))


def all_base_files_before_or_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    max_instant = p.required(MAX_INSTANT)
    return {
        part: w.base_files(_bases_before_or_on(s, part, max_instant)) for part in s.partitions()
    }


def base_file_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    instant, file_id = p.required(INSTANT), p.required(FILEID)
    out = []
    for group in s.file_groups(p.partition):
        if group.file_id != file_id or s.replaced_before(group, instant):
            continue
        found = next((b for b in s.base_files(group) if b.name.instant_time == instant), None)
        if found is not None:
            out.append(found)
    return w.base_files(out)


def all_base_files(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.base_files(
        x.base_file for g in s.live_groups(p.partition) for x in s.slices(g) if x.base_file
    )


def base_files_in_range(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.base_files(_in_range(s, p, s.base_files, lambda b: b.name.instant_time))


# File groups ------------------------------------------------------------------------------


def all_file_groups(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.file_groups(s.live_groups(p.partition))


def _replaced_groups(
    s: Snapshot, partition: str, keep: Callable[[FileGroup], bool]
) -> list[FileGroup]:
    return sorted_groups(g for g in s.file_groups(partition) if s.is_replaced(g) and keep(g))


def replaced_before_or_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    ts = p.optional(MAX_INSTANT)
    return w.file_groups(_replaced_groups(s, p.partition, lambda g: s.replaced_before_or_on(g, ts)))


def replaced_before(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    ts = p.optional(MAX_INSTANT)
    return w.file_groups(_replaced_groups(s, p.partition, lambda g: s.replaced_before(g, ts)))


def replaced_after_or_on(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    ts = p.optional(MIN_INSTANT)
    return w.file_groups(_replaced_groups(s, p.partition, lambda g: s.replaced_after_or_on(g, ts)))


def all_replaced(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return w.file_groups(_replaced_groups(s, p.partition, lambda g: True))


# Pending table services and the timeline ----------------------------------------------------


def pending_compactions(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return [compaction_op(op) for _, op in sorted(s.pending_compaction.items())]


def pending_log_compactions(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return [compaction_op(op) for _, op in sorted(s.pending_log_compaction.items())]


def pending_clustering(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return [clustering_op(c) for c in s.pending_clustering]


def timeline(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return timeline_dto(s.visible)


def last(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return last_instant(s.last_instant)


def timeline_hash(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    return s.hash


def done(s: Snapshot, w: DtoWriter, p: Params) -> Any:
    """The POST calls that only ask the server to (re)load: answered `true`."""
    return True


def _get(name: str, answer: Answer, covered: Covered = _one, check: bool = True) -> Endpoint:
    return Endpoint(name, "GET", check, answer, covered)


def _post(name: str) -> Endpoint:
    return Endpoint(name, "POST", False, done, _none)


ENDPOINTS: dict[str, Endpoint] = {
    "slices/partition/latest": _get("LATEST_PARTITION_SLICES", latest_slices),
    "slices/partition/latest/stateless": _get("LATEST_PARTITION_SLICES_STATELESS", latest_slices),
    "slices/file/latest": _get("LATEST_PARTITION_SLICE", latest_slice),
    "slices/uncompacted/partition/latest": _get(
        "LATEST_PARTITION_UNCOMPACTED_SLICES", uncompacted_slices
    ),
    "slices/all": _get("ALL_SLICES", all_slices),
    "slices/range/latest": _get("LATEST_SLICE_RANGE_INSTANT", slices_in_range, _all),
    "slices/merged/beforeoron/latest": _get(
        "LATEST_SLICES_MERGED_BEFORE_ON_INSTANT", merged_before_or_on
    ),
    "slice/merged/beforeoron/latest": _get(
        "LATEST_SLICE_MERGED_BEFORE_ON_INSTANT", merged_slice_before_or_on
    ),
    "slices/beforeoron/latest": _get("LATEST_SLICES_BEFORE_ON_INSTANT", slices_before_or_on),
    "slices/all/beforeoron/latest": _get(
        "ALL_LATEST_SLICES_BEFORE_ON_INSTANT", all_slices_before_or_on, _all
    ),
    "compactions/pending": _get("PEDING_COMPACTION_OPS", pending_compactions, _none),
    "logcompactions/pending": _get("PEDING_LOG_COMPACTION_OPS", pending_log_compactions, _none),
    "datafiles/latest/partition": _get("LATEST_PARTITION_DATA_FILES", latest_base_files),
    "datafile/latest/partition": _get("LATEST_PARTITION_DATA_FILE", latest_base_file),
    "datafiles/all": _get("ALL_DATA_FILES", all_base_files),
    "datafiles/all/latest": _get("LATEST_ALL_DATA_FILES", all_latest_base_files, _all),
    "datafile/on/latest": _get("LATEST_DATA_FILE_ON_INSTANT", base_file_on),
    "datafiles/range/latest": _get("LATEST_DATA_FILES_RANGE_INSTANT", base_files_in_range, _all),
    "datafiles/beforeoron/latest": _get(
        "LATEST_DATA_FILES_BEFORE_ON_INSTANT", base_files_before_or_on
    ),
    "basefiles/all/beforeoron": _get(
        "ALL_LATEST_BASE_FILES_BEFORE_ON_INSTANT", all_base_files_before_or_on, _all
    ),
    "filegroups/all/partition": _get("ALL_FILEGROUPS_FOR_PARTITION", all_file_groups),
    "filegroups/all/partition/stateless": _get(
        "ALL_FILEGROUPS_FOR_PARTITION_STATELESS", all_file_groups
    ),
    "filegroups/replaced/beforeoron": _get(
        "ALL_REPLACED_FILEGROUPS_BEFORE_OR_ON", replaced_before_or_on
    ),
    "filegroups/replaced/before": _get("ALL_REPLACED_FILEGROUPS_BEFORE", replaced_before),
    "filegroups/replaced/afteroron": _get(
        "ALL_REPLACED_FILEGROUPS_AFTER_OR_ON", replaced_after_or_on
    ),
    "filegroups/replaced/partition": _get("ALL_REPLACED_FILEGROUPS_PARTITION", all_replaced),
    "clustering/pending": _get("PENDING_CLUSTERING_FILEGROUPS", pending_clustering, _none),
    "timeline/instant/last": _get("LAST_INSTANT", last, _none, check=False),
    "timeline/instants/all": _get("TIMELINE", timeline, _none, check=False),
    "timeline/hash": _get("TIMELINE_HASH", timeline_hash, _none, check=False),
    "refresh": _post("REFRESH_TABLE"),
    "inittimeline": _post("INIT_TIMELINE"),
    "close": _post("CLOSE_TABLE"),
    "loadallpartitions": _post("LOAD_ALL_PARTITIONS"),
    "loadpartitions": _post("LOAD_PARTITIONS"),
}
"""By path below `/v1/hoodie/view/`, without the trailing '/' some of Hudi's URLs carry
(Javalin ignores trailing slashes)."""
