"""Commits the service reads off a table's timeline itself (the pull fallback).

A writer that stops notifying (callback misconfigured, restarted without it, a Flink job, a
client that only registers) still commits to its table. A pull reads the table's timeline
(one listing; no data files), takes the completed instants the store has not heard of, reads
the commit metadata of the newest of them for their write stats, and records them exactly
as notifications would be recorded (`record_commits`: same rows and counters, marked
`pulled`), then runs the triggers, in one transaction.

Storage is read in two steps (`read_timeline`, then `read_new`) so that the store, asked in
between, says which instants are new: only those cost a read.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from tms.application import OperationManager
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action as HudiAction
from tms.hudi.timeline.instant import Instant
from tms.hudi.timeline.timeline import Timeline
from tms.ingest.commit_action import CommitSummary, summarize, timeline_action
from tms.store import CommitIn, Operation, counted_tables, record_commits

__all__ = [
    "MAX_DETAILED",
    "RECORDED_ACTIONS",
    "PulledCommit",
    "PulledTimeline",
    "Recorded",
    "read_new",
    "read_timeline",
    "write_pulled",
]

log = logging.getLogger(__name__)

RECORDED_ACTIONS = frozenset(
    {
        HudiAction.COMMIT,
        HudiAction.DELTA_COMMIT,
        HudiAction.REPLACE_COMMIT,
        HudiAction.CLUSTERING,
        HudiAction.COMPACTION,
        HudiAction.CLEAN,
    }
)
"""Completed instants a pull records: writes, and the services whose counters they restart."""

MAX_DETAILED = 100
"""New instants of one pull whose commit metadata is read (the newest); older ones (a long
history seen for the first time) are recorded with their action only."""


@dataclass(frozen=True)
class PulledCommit:
    instant: str
    action: str
    summary: CommitSummary


@dataclass
class PulledTimeline:
    """What one listing of a table's timeline showed."""

    timeline: Timeline
    completed: list[Instant] = field(default_factory=list)
    """Completed instants of `RECORDED_ACTIONS`, oldest first."""

    @property
    def oldest(self) -> str | None:
        return self.completed[0].requested_time if self.completed else None


def read_timeline(base_path: str, storage_options: dict[str, object]) -> PulledTimeline:
    """The table's active timeline (`hoodie.properties` and one listing). Storage I/O."""
    timeline = HudiTable.open(base_path, storage_options).timeline()
    completed = [i for i in timeline.completed() if i.action in RECORDED_ACTIONS]
    return PulledTimeline(timeline, completed)


def read_new(
    pulled: PulledTimeline, known: Collection[str], *, small_file_bytes: int
) -> list[PulledCommit]:
    """The completed instants not in `known`, oldest first, with the write stats of the
    newest `MAX_DETAILED` of them. Storage I/O: one read per detailed instant (and the
    requested file of a replacecommit whose action it must tell)."""
    new = [i for i in pulled.completed if i.requested_time not in known]
    detailed = {i.requested_time for i in new[-MAX_DETAILED:]}
    commits = []
    for instant in new:
        action = timeline_action(pulled.timeline, instant)
        summary = CommitSummary(0, 0, 0, 0)
        if instant.requested_time in detailed and instant.action is not HudiAction.CLEAN:
            try:
                metadata = pulled.timeline.commit_metadata(instant)
                summary = summarize(metadata.write_stats(), small_file_bytes)
            except Exception as exc:  # unreadable metadata: the commit still counts
                log.warning(
                    "commit metadata of %s at %s not read: %s",
                    instant.requested_time,
                    pulled.timeline.storage.base_path,
                    exc,
                )
        commits.append(PulledCommit(instant.requested_time, action, summary))
    return commits


@dataclass(frozen=True)
class Recorded:
    """What recording one table's pulled commits did."""

    new: int
    """Commits that were new to the store."""
    operations: list[Operation]
    """Operations its triggers created."""


def write_pulled(
    session: Session, manager: OperationManager, pulled: Mapping[int, list[PulledCommit]]
) -> dict[int, Recorded]:
    """Record the commits pulled per table id and run the tables' triggers (also with no
    new commit: time-based triggers fire on a table that went quiet), in the caller's
    transaction: one insert and one counter update for all of a round's tables. A table
    removed meanwhile is left out."""
    # The rows are locked in id order first, as commit ingest locks them: no deadlock.
    locked = counted_tables(session, list(pulled))
    rows = [
        CommitIn(
            table.id,
            c.instant,
            c.action,
            records=c.summary.records,
            bytes_written=c.summary.bytes_written,
            files=c.summary.files,
            log_files=c.summary.log_files,
            log_bytes=c.summary.log_bytes,
            small_files=c.summary.small_files,
            pulled=True,
        )
        for table in locked
        for c in pulled[table.id]
    ]
    recorded = record_commits(session, rows)
    tables = [recorded.tables.get(table.id, table) for table in locked]
    created = manager.create_due(session, tables)
    new = {table.id: 0 for table in locked}
    for row, is_new in zip(rows, recorded.new, strict=True):
        new[row.tbl_id] += is_new
    return {t.id: Recorded(new[t.id], created.get(t.id, [])) for t in locked}
