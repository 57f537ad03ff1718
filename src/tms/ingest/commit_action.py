"""What a commit callback is about: its action and a summary of its write stats.

Released Hudi writers lose `commitActionType` (`{"present": true}`), so the action is
inferred, most reliable source first: a string the writer did send; log files in the
write stats (only delta commits append to logs); the instant on the table's timeline;
finally the table type (merge-on-read writers make delta commits).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tms.hudi.timeline.instant import Action as HudiAction
from tms.ingest.schema import WriteStatIn
from tms.store import TableType

__all__ = [
    "CommitSummary",
    "action_from_payload",
    "action_from_stats",
    "action_from_table_type",
    "summarize",
]

_KNOWN = frozenset(a.value for a in HudiAction)
_LOG_FILE = re.compile(r"^\..+\.log\.\d+(_.+)?$")
_MAX_BIGINT = 2**63 - 1
_MAX_INT = 2**31 - 1


@dataclass(slots=True)
class CommitSummary:
    records: int
    bytes_written: int
    files: int
    log_files: int


def action_from_payload(value: Any) -> str | None:
    """A known Hudi action the writer named; `{"present": true}` and the like say nothing
    (some serialisers keep the value next to `present`, which is used when it is there)."""
    if isinstance(value, dict):
        value = value.get("value", value.get("val"))
    if isinstance(value, str) and value.strip().lower() in _KNOWN:
        return value.strip().lower()
    return None


def _is_log_stat(stat: WriteStatIn) -> bool:
    if stat.log_files or stat.log_version is not None:
        return True
    return bool(stat.path) and bool(_LOG_FILE.match(posixpath.basename(stat.path or "")))


def action_from_stats(summary: CommitSummary) -> str | None:
    """`deltacommit` when any write stat wrote a log file; otherwise the stats cannot tell."""
    if summary.log_files:
        return HudiAction.DELTA_COMMIT.value
    return None


def action_from_table_type(table_type: TableType | None) -> str:
    if table_type is TableType.MERGE_ON_READ:
        return HudiAction.DELTA_COMMIT.value
    return HudiAction.COMMIT.value


def summarize(stats: Sequence[WriteStatIn]) -> CommitSummary:
    """Records and bytes written, files touched, log files among them (clamped to the
    column ranges: a writer's odd numbers must not make the notification fail)."""
    records = sum(max(s.num_writes or 0, 0) for s in stats)
    written = sum(max(s.total_write_bytes or s.file_size_in_bytes or 0, 0) for s in stats)
    paths = {s.path or f"{s.partition_path}/{s.file_id}" for s in stats}
    logs = {s.path or f"{s.partition_path}/{s.file_id}" for s in stats if _is_log_stat(s)}
    return CommitSummary(
        records=min(records, _MAX_BIGINT),
        bytes_written=min(written, _MAX_BIGINT),
        files=min(len(paths), _MAX_INT),
        log_files=min(len(logs), _MAX_INT),
    )
