"""What pending work holds a partition that partition TTL must then leave alone.

Hudi's delete-partition executor fails while a pending compaction, log compaction or
clustering plans file groups of a partition it deletes (`DeletePartitionUtils`): those
partitions are left out. So are the partitions of every write pending on the timeline (a
commit, delta commit or replacecommit that is no table service plan), as far as tms can tell
them from the table:

- the workload profile Hudi's writers put in an inflight instant before they write a file
  (`partitionToWriteStats` keyed by every partition the write goes to);
- the write's markers, direct (`.hoodie/.temp/<instant>/<partition>/…`) or the `MARKERS<n>`
  files a timeline server (Hudi's, or tms's marker server) writes before it answers the
  writer: the partitions it has written to so far;
- for a pending partition TTL of tms, the partitions its plan records.

A write of which none says anything (requested, not yet inflight; inflight with neither a
profile nor markers; a writer's own `delete_partition` whose partitions only it knows) may
write anywhere: every partition is left out while it is pending, with that reason.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.errors import HudiError
from tms.hudi.files.fs_view import clustering_plan_file_groups, compaction_plan_file_groups
from tms.hudi.files.markers import list_markers
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import Timeline

__all__ = [
    "DELETE_PARTITION",
    "PLAN_PARTITIONS_KEY",
    "PendingWork",
    "is_delete_partition",
    "pending_work",
    "recorded_partitions",
    "requested_replace",
]

DELETE_PARTITION = "DELETE_PARTITION"
"""Hudi's `WriteOperationType` of a replacecommit that deletes whole partitions."""
PLAN_PARTITIONS_KEY = "tms.partitionTtl.partitions"
"""The `extraMetadata` key of a partition TTL plan naming its partitions (a JSON list)."""


@dataclass
class PendingWork:
    """Per partition, the pending work that holds it; and what holds every partition."""

    partitions: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    everywhere: list[str] = field(default_factory=list)

    def hold(self, partition: str, reason: str) -> None:
        """Note that `reason` holds `partition` (once, however many file groups say so)."""
        if reason not in self.partitions[partition]:
            self.partitions[partition].append(reason)

    def reasons(self, partition: str) -> list[str]:
        """Why `partition` must be left alone now; empty when nothing holds it."""
        return [*self.everywhere, *self.partitions.get(partition, [])]


def is_delete_partition(requested: Mapping[str, Any] | None) -> bool:
    """Whether a replacecommit's requested metadata is a delete of partitions."""
    return requested is not None and requested.get("operationType") == DELETE_PARTITION


def recorded_partitions(requested: Mapping[str, Any] | None) -> list[str] | None:
    """The partitions a partition TTL plan of tms records; None for a plan that records none
    (a writer's `delete_partition`, which keeps its list to itself) or a garbled one."""
    extra = (requested or {}).get("extraMetadata") or {}
    text = extra.get(PLAN_PARTITIONS_KEY)
    if not isinstance(text, str):
        return None
    try:
        names = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return names


def pending_work(table: HudiTable, timeline: Timeline, *, ignore: str = "") -> PendingWork:
    """The pending work on `table` that holds partitions, but the instant `ignore` (a plan
    checked against the table before it runs)."""
    work = PendingWork()
    for partition, reason in _table_service_plans(timeline):
        work.hold(partition, reason)
    for instant in timeline.pending_writes():
        if instant.requested_time == ignore:
            continue
        partitions, reason = _write_partitions(table, timeline, instant)
        if partitions is None:
            work.everywhere.append(reason)
            continue
        for partition in sorted(partitions):
            work.hold(partition, reason)
    return work


def _table_service_plans(timeline: Timeline) -> Iterator[tuple[str, str]]:
    """(partition, reason) of every file group a pending compaction, log compaction or
    clustering plans, as Hudi's delete-partition executor checks them."""
    planned = (
        ("compaction", compaction_plan_file_groups(timeline, timeline.pending_compactions())),
        (
            "log compaction",
            compaction_plan_file_groups(timeline, timeline.pending((Action.LOG_COMPACTION,))),
        ),
        ("clustering", clustering_plan_file_groups(timeline)),
    )
    for action, groups in planned:
        for instant, partition, _ in groups:
            yield partition, f"{action} {instant.requested_time} is pending on it"


def _write_partitions(
    table: HudiTable, timeline: Timeline, instant: Instant
) -> tuple[set[str] | None, str]:
    """The partitions a pending write goes to and the reason it holds them; None with the
    reason when the table does not tell them."""
    ts = instant.requested_time
    requested = requested_replace(timeline, instant)
    if is_delete_partition(requested):
        recorded = recorded_partitions(requested)
        if recorded is None:
            return None, (
                f"delete_partition {ts} is pending and records no partitions (a writer's "
                "own: the partitions it deletes are known to it alone)"
            )
        return set(recorded), f"partition TTL {ts} is pending on it"
    what = f"write {ts} ({instant.action.value}, {instant.state.name.lower()})"
    try:
        marked = {m.partition_path for m in list_markers(table.storage, ts)}
    except (HudiError, OSError, ValueError) as exc:
        return None, f"{what} is pending and its markers cannot be read ({exc})"
    profiled = _workload_profile(timeline, instant)
    if profiled is None and not marked:
        return None, (
            f"{what} is pending and neither a workload profile nor markers say which "
            "partitions it writes; it may write any (rolled back once its writer is gone: "
            "a clean with rollback_failed_writes, or the writers)"
        )
    return (profiled or set()) | marked, f"{what} is pending on it"


def requested_replace(timeline: Timeline, instant: Instant) -> dict[str, Any] | None:
    """A replacecommit's requested metadata; None for another action or one unreadable."""
    if instant.action is not Action.REPLACE_COMMIT:
        return None
    try:
        return timeline.requested_replace_metadata(instant)
    except (ValueError, OSError):
        return None


def _workload_profile(timeline: Timeline, instant: Instant) -> set[str] | None:
    """The partitions an inflight write's workload profile names; None without one."""
    if instant.state is not State.INFLIGHT:
        return None
    try:
        data = timeline.read_instant(instant, State.INFLIGHT)
        partitions = CommitMetadata.from_bytes(data).partitions() if data else []
    except (ValueError, OSError, KeyError, TypeError):
        return None
    return set(partitions) or None
