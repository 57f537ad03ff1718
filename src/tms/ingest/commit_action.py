"""What a commit callback is about: its action and a summary of its write stats.

Released Hudi writers lose `commitActionType` (`{"present": true}`), so the action is
inferred, most reliable source first: a string the writer did send; log files in the
write stats (only delta commits append to logs); the instant on the table's timeline;
finally the table type (merge-on-read writers make delta commits).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from tms.hudi.timeline.instant import Action as HudiAction
from tms.hudi.timeline.instant import Instant
from tms.hudi.timeline.timeline import Timeline
from tms.store import TableType

__all__ = [
    "CommitSummary",
    "SummaryBuilder",
    "action_from_payload",
    "action_from_stats",
    "action_from_table_type",
    "summarize",
    "timeline_action",
]

_KNOWN = frozenset(a.value for a in HudiAction)
_LOG_FILE = re.compile(r"^\..+\.log\.\d+(_.+)?$")
_MAX_BIGINT = 2**63 - 1
_MAX_INT = 2**31 - 1


MAX_SMALL_FILE_PARTITIONS = 1000
"""Partitions a summary keeps small-file counts for (the most small files first)."""


@dataclass(slots=True)
class CommitSummary:
    records: int
    bytes_written: int
    files: int
    log_files: int
    log_bytes: int = 0
    small_files: dict[str, int] = field(default_factory=dict)
    """Base files written smaller than the small-file size, per partition path."""


class StatLike(Protocol):
    """The write stat fields a summary reads: a notification's (`WriteStatIn`) and a
    timeline's (`tms.hudi.avro.write_stat.WriteStat`) alike."""

    @property
    def file_id(self) -> str | None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def partition_path(self) -> str | None: ...
    @property
    def num_writes(self) -> int | None: ...
    @property
    def total_write_bytes(self) -> int | None: ...
    @property
    def file_size_in_bytes(self) -> int | None: ...
    @property
    def log_version(self) -> int | None: ...
    @property
    def log_files(self) -> Any: ...


def action_from_payload(value: Any) -> str | None:
    """A known Hudi action the writer named; `{"present": true}` and the like say nothing
    (some serialisers keep the value next to `present`, which is used when it is there)."""
    if isinstance(value, dict):
        value = value.get("value", value.get("val"))
    if isinstance(value, str) and value.strip().lower() in _KNOWN:
        return value.strip().lower()
    return None


def _is_log_stat(stat: StatLike) -> bool:
    if stat.log_files or stat.log_version is not None:
        return True
    return bool(stat.path) and bool(_LOG_FILE.match(posixpath.basename(stat.path or "")))


def action_from_stats(summary: CommitSummary) -> str | None:
    """`deltacommit` when any write stat wrote a log file; otherwise the stats cannot tell."""
    if summary.log_files:
        return HudiAction.DELTA_COMMIT.value
    return None


def timeline_action(timeline: Timeline, instant: Instant) -> str:
    """The action of `instant` as notifications name it: a completed compaction, log
    compaction or clustering by what it was requested as, not by its commit action (reads a
    replacecommit's requested file when its requested action does not tell)."""
    if timeline.is_compaction(instant):
        return HudiAction.COMPACTION.value
    if timeline.origin_action(instant) is HudiAction.LOG_COMPACTION:
        return HudiAction.LOG_COMPACTION.value
    clustering = (HudiAction.REPLACE_COMMIT, HudiAction.CLUSTERING)
    if instant.action in clustering and timeline.is_clustering(instant):
        return HudiAction.CLUSTERING.value
    return instant.action.value


def action_from_table_type(table_type: TableType | None) -> str:
    if table_type is TableType.MERGE_ON_READ:
        return HudiAction.DELTA_COMMIT.value
    return HudiAction.COMMIT.value


def summarize(stats: Iterable[StatLike], small_file_bytes: int | None = None) -> CommitSummary:
    """Records and bytes written, files touched, log files among them and their bytes, and
    base files smaller than `small_file_bytes` per partition (clamped to the column ranges:
    a writer's odd numbers must not make the notification fail)."""
    summary = SummaryBuilder(small_file_bytes)
    for stat in stats:
        summary.add(stat)
    return summary.build()


class SummaryBuilder:
    """`summarize`, one write stat at a time, keeping 8 bytes (a digest of its file's path)
    per stat rather than the stat: a callback's stats are summed while it is parsed."""

    def __init__(self, small_file_bytes: int | None = None) -> None:
        self.small_file_bytes = small_file_bytes
        self.records = 0
        self.written = 0
        self.log_bytes = 0
        self._files = array("Q")
        self._logs = array("Q")
        self._small: Counter[str] = Counter()

    def add(self, stat: StatLike) -> None:
        size = max(stat.total_write_bytes or stat.file_size_in_bytes or 0, 0)
        self.records += max(stat.num_writes or 0, 0)
        self.written += size
        digest = _digest(stat.path or f"{stat.partition_path}/{stat.file_id}")
        self._files.append(digest)
        if _is_log_stat(stat):
            self._logs.append(digest)
            self.log_bytes += size
        elif self.small_file_bytes and 0 < (stat.file_size_in_bytes or 0) < self.small_file_bytes:
            self._small[stat.partition_path or ""] += 1
            if len(self._small) > _SMALL_FILE_PARTITIONS_HELD:
                self._small = Counter(dict(self._small.most_common(MAX_SMALL_FILE_PARTITIONS)))

    def build(self) -> CommitSummary:
        return CommitSummary(
            records=min(self.records, _MAX_BIGINT),
            bytes_written=min(self.written, _MAX_BIGINT),
            files=min(_distinct(self._files), _MAX_INT),
            log_files=min(_distinct(self._logs), _MAX_INT),
            log_bytes=min(self.log_bytes, _MAX_BIGINT),
            small_files=dict(self._small.most_common(MAX_SMALL_FILE_PARTITIONS)),
        )


_SMALL_FILE_PARTITIONS_HELD = 10 * MAX_SMALL_FILE_PARTITIONS
"""Partitions counted before the ones with the fewest small files are let go."""


def _distinct(digests: array[int]) -> int:
    """How many different digests: sorted by Arrow, then the changes between neighbours
    counted (a few bytes a digest; Arrow's hash-based count takes ~300 bytes a digest)."""
    if len(digests) < 2:
        return len(digests)
    values = pa.Array.from_buffers(pa.uint64(), len(digests), [None, pa.py_buffer(digests)])
    ordered = pc.take(values, pc.array_sort_indices(values))
    return 1 + int(pc.sum(pc.not_equal(ordered[1:], ordered[:-1])).as_py())


def _digest(path: str) -> int:
    """A file's identity in the summary: 64 bits of its path (collisions ~2^-64 a pair)."""
    data = path.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")
