"""Planning partition TTL: the partitions whose last commit is more than `ttl_days` days old
(Hudi's `KEEP_BY_TIME` strategy), and `<ts>.replacecommit.requested` holding Hudi's
`HoodieRequestedReplaceMetadata` of a `DELETE_PARTITION`, as Hudi's write client writes it
(`startDeletePartitionCommit`), with the partitions to delete recorded in its
`extraMetadata` for the executor to read back.

A partition's last commit time is Hudi's: the newest base instant time of its latest file
slices as of the TTL's own instant (`getLatestFileSlicesBeforeOrOn`, a pending compaction's
slice included). So on a merge-on-read table updates written as log files do not renew a
partition, a compaction does; a partition whose file groups were all replaced (deleted by an
earlier TTL) has none and is never expired. A partition is expired once the reference time
(the plan's instant) is later than its last commit time plus `ttl_days` days of 24 hours.

`ttl_partitions` restricts the partitions considered: glob patterns over partition paths
(`fnmatch`: `*` matches any characters, `/` included, `?` one, `[...]` a set), one or more,
comma-separated; a partition matching any is considered. Hudi's own setting
(`hoodie.partition.ttl.strategy.partition.selected`) lists exact paths, each of which is a
pattern matching itself. Expired partitions that pending work holds
(`tms.services.partition_ttl.pending`) are left out, with the reason. At most
`ttl_max_partitions` go in one plan (Hudi's `max.delete.partitions`), the oldest first.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import (
    Action,
    Instant,
    format_instant_time,
    is_instant_time,
    parse_instant_time,
)
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline
from tms.hudi.timeline.transitions import plan_instant_time, request
from tms.planning import DEFAULT_TTL_MAX_PARTITIONS, ttl_patterns
from tms.services.partition_ttl.pending import (
    DELETE_PARTITION,
    PLAN_PARTITIONS_KEY,
    PendingWork,
    is_delete_partition,
    pending_work,
    recorded_partitions,
    requested_replace,
)

__all__ = [
    "PLAN_AS_OF_KEY",
    "PLAN_DAYS_KEY",
    "PartitionVerdict",
    "TtlReport",
    "dry_run",
    "expires",
    "last_commit_time",
    "pending_partition_ttls",
    "plan_refusals",
    "planned_partitions",
    "schedule_partition_ttl",
    "selected",
]

PLAN_DAYS_KEY = "tms.partitionTtl.daysRetain"
PLAN_AS_OF_KEY = "tms.partitionTtl.asOf"
"""`extraMetadata` keys of a plan: the TTL in days and the reference time it was made at."""
PLAN_VERSION = 1


@dataclass(frozen=True)
class PartitionVerdict:
    """One partition as the TTL sees it: its last commit time (None without live file
    slices) and why it goes or stays."""

    partition: str
    last_commit_time: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "last_commit_time": self.last_commit_time,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class TtlReport:
    """What a partition TTL as of `as_of` deletes and what it keeps, and why."""

    as_of: str
    ttl_days: int
    patterns: tuple[str, ...]
    expired: tuple[PartitionVerdict, ...] = ()
    """The partitions it deletes, oldest last commit first."""
    kept: tuple[PartitionVerdict, ...] = ()
    """The selected partitions it keeps, by path: not expired, or held by pending work."""
    not_selected: int = 0
    """Partitions no pattern matches."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    """Why nothing is considered at all (an unpartitioned table, an empty timeline)."""

    @property
    def partitions(self) -> list[str]:
        return [v.partition for v in self.expired]

    def to_dict(self) -> dict[str, Any]:
        return {
            "as_of": self.as_of,
            "ttl_days": self.ttl_days,
            "partitions_selected": list(self.patterns),
            "expired": [v.to_dict() for v in self.expired],
            "kept": [v.to_dict() for v in self.kept],
            "not_selected": self.not_selected,
            "notes": list(self.notes),
        }


def selected(partition: str, patterns: Sequence[str]) -> bool:
    """Whether a partition path matches one of the glob `patterns` (all, when none)."""
    return not patterns or any(fnmatch.fnmatchcase(partition, p) for p in patterns)


def expires(last_commit_time: str, ttl_days: int, as_of: str) -> bool:
    """Hudi's `isPartitionExpired`: `as_of` is later than the last commit time plus the TTL
    (times of 14 digits read with 999 milliseconds, as Hudi reads them). `ValueError` for a
    last commit time that is no date (a bootstrap's placeholder)."""
    moment = _moment(last_commit_time) + timedelta(days=ttl_days)
    return _millis(as_of) > format_instant_time(moment)


def dry_run(
    table: HudiTable,
    *,
    ttl_days: int,
    ttl_partitions: str | Sequence[str] = (),
    ttl_max_partitions: int = DEFAULT_TTL_MAX_PARTITIONS,
    now: str | None = None,
    timeline: Timeline | None = None,
) -> TtlReport:
    """What a partition TTL as of `now` (an instant time; the current time when None) would
    delete and keep, and why; reads the table, writes nothing."""
    if ttl_days <= 0:
        raise ValueError(f"ttl_days must be positive, got {ttl_days}")
    timeline = timeline or table.timeline()
    as_of = now or format_instant_time(datetime.now(UTC))
    if not is_instant_time(as_of):
        raise ValueError(f"now {as_of!r} is not an instant time (yyyyMMddHHmmss[SSS])")
    patterns = ttl_patterns(ttl_partitions)
    notes = _nothing_considered(table, timeline)
    if notes:
        return TtlReport(as_of, ttl_days, patterns, notes=tuple(notes))
    view = table.file_system_view(timeline)
    chosen = [p for p in view.partitions if selected(p, patterns)]
    verdicts = [_verdict(view, p, ttl_days, as_of) for p in chosen]
    expired, kept = _split(verdicts, pending_work(table, timeline), ttl_max_partitions)
    return TtlReport(
        as_of,
        ttl_days,
        patterns,
        tuple(expired),
        tuple(sorted(kept, key=lambda v: v.partition)),
        len(view.partitions) - len(chosen),
    )


def schedule_partition_ttl(
    table: HudiTable,
    *,
    ttl_days: int,
    ttl_partitions: str | Sequence[str] = (),
    ttl_max_partitions: int = DEFAULT_TTL_MAX_PARTITIONS,
    instant_time: str | None = None,
    now: str | None = None,
) -> str | None:
    """Plan the deletion of the expired partitions as of `now` (the plan's own instant when
    None, as Hudi takes it); its instant, or None when none is expired (or every expired one
    is held). `instant_time` must be later than every instant on the timeline."""
    timeline = table.timeline()
    instant = plan_instant_time(timeline.instants, instant_time)
    report = dry_run(
        table,
        ttl_days=ttl_days,
        ttl_partitions=ttl_partitions,
        ttl_max_partitions=ttl_max_partitions,
        now=now or instant,
        timeline=timeline,
    )
    if not report.expired:
        return None
    extra = {
        PLAN_PARTITIONS_KEY: json.dumps(report.partitions),
        PLAN_DAYS_KEY: str(ttl_days),
        PLAN_AS_OF_KEY: report.as_of,
    }
    requested = {
        "operationType": DELETE_PARTITION,
        "clusteringPlan": None,
        "extraMetadata": extra,
        "version": PLAN_VERSION,
    }
    content = avro_codec.encode("HoodieRequestedReplaceMetadata", requested)
    request(table.storage, table.config, instant, Action.REPLACE_COMMIT, content)
    return instant


def pending_partition_ttls(timeline: Timeline) -> list[Instant]:
    """Pending partition TTL plans of tms, oldest first: replacecommits deleting partitions
    whose plan records them (a writer's own `delete_partition` records none: not ours to
    run). Never a clustering: that is a replacecommit whose operation is `CLUSTER`."""
    return [
        i
        for i in timeline.pending((Action.REPLACE_COMMIT,))
        if planned_partitions(timeline, i) is not None
    ]


def planned_partitions(timeline: Timeline, instant: Instant) -> list[str] | None:
    """The partitions the partition TTL plan at `instant` deletes; None when the instant is
    no partition TTL plan of tms."""
    requested = requested_replace(timeline, instant)
    if not is_delete_partition(requested):
        return None
    return recorded_partitions(requested)


def plan_refusals(table: HudiTable, instant: Instant, partitions: Sequence[str]) -> list[str]:
    """Why the partition TTL plan at `instant` must not run now: pending work holding a
    partition it deletes, or a write completed after the plan was made that wrote to one
    (the partition is no longer the one the plan found expired). Empty when it may run."""
    timeline = table.timeline()
    held = pending_work(table, timeline, ignore=instant.requested_time)
    reasons = list(held.everywhere) if partitions else []
    for partition in partitions:
        reasons += [f"{partition}: {r}" for r in held.partitions.get(partition, [])]
    wanted = set(partitions)
    for done in _completed_after(timeline, instant.requested_time):
        touched = sorted(wanted & _partitions_written(timeline, done))
        if touched:
            reasons.append(
                f"{', '.join(touched)}: written by {done.requested_time} after the plan was made"
            )
    return reasons


def _completed_after(timeline: Timeline, plan_time: str) -> list[Instant]:
    """Writes completed after `plan_time` (by completion time; layout 1, which records
    none: requested after it)."""
    return [
        i
        for i in timeline.completed(WRITE_COMMIT_ACTIONS)
        if (i.completion_time or i.requested_time) > plan_time
    ]


def _partitions_written(timeline: Timeline, instant: Instant) -> set[str]:
    metadata = timeline.commit_metadata(instant)
    written = set(metadata.partitions())
    if isinstance(metadata, ReplaceCommitMetadata):
        written |= set(metadata.partition_to_replace_file_ids)
    return written


def _nothing_considered(table: HudiTable, timeline: Timeline) -> list[str]:
    """Hudi's reasons for deleting nothing whatever the TTL says."""
    if not table.config.partition_fields:
        return ["the table is not partitioned (hoodie.table.partition.fields is empty)"]
    if not timeline.completed():
        return ["the table has no completed instant"]
    return []


def _verdict(view: FileSystemView, partition: str, ttl_days: int, as_of: str) -> PartitionVerdict:
    """The partition's last commit time (Hudi's) and whether it is past the TTL; `reason`
    says why it stays, or is empty for an expired one."""
    last = last_commit_time(view, partition, as_of)
    if last is None:
        return PartitionVerdict(partition, None, "no live file slices (nothing to delete)")
    try:
        expired = expires(last, ttl_days, as_of)
    except (ValueError, OverflowError):
        return PartitionVerdict(partition, last, f"last commit time {last} is not a date")
    if not expired:
        return PartitionVerdict(partition, last, f"last commit within {ttl_days} days")
    return PartitionVerdict(partition, last, "")


def last_commit_time(view: FileSystemView, partition: str, as_of: str) -> str | None:
    """The newest base instant time of the partition's latest file slices on or before
    `as_of`; None when it has none."""
    latest: list[str] = []
    for group in view.groups_in(partition):
        starts = [s.base_instant_time for s in group.slices if s.base_instant_time <= as_of]
        if starts:
            latest.append(max(starts))
    return max(latest, default=None)


def _split(
    verdicts: list[PartitionVerdict], held: PendingWork, limit: int
) -> tuple[list[PartitionVerdict], list[PartitionVerdict]]:
    """(expired partitions to delete, oldest first, at most `limit`; partitions kept)."""
    kept = [v for v in verdicts if v.reason]
    candidates = sorted(
        (v for v in verdicts if not v.reason),
        key=lambda v: (v.last_commit_time or "", v.partition),
    )
    expired: list[PartitionVerdict] = []
    for verdict in candidates:
        reasons = held.reasons(verdict.partition)
        if reasons:
            reason = "expired, but " + "; ".join(reasons)
        elif len(expired) >= limit:
            reason = f"expired, over the {limit} partitions one plan deletes (the next run's)"
        else:
            expired.append(PartitionVerdict(verdict.partition, verdict.last_commit_time, "expired"))
            continue
        kept.append(PartitionVerdict(verdict.partition, verdict.last_commit_time, reason))
    return expired, kept


def _millis(instant_time: str) -> str:
    return instant_time + "999" if len(instant_time) == 14 else instant_time


def _moment(instant_time: str) -> datetime:
    """An instant time as a UTC moment (14 digits: at 999 milliseconds)."""
    return parse_instant_time(_millis(instant_time))
