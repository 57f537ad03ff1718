"""What a run of completed data instants changed, read from their metadata on the driver:
file names and file group ids, never records (the catch-up's work list)."""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.names import BaseFileName
from tms.hudi.timeline.instant import WRITE_ACTIONS, Action, Instant
from tms.hudi.timeline.timeline import Timeline

__all__ = ["Changes", "changes_of"]


@dataclass
class Changes:
    """What a run of completed data instants changed, by name."""

    file_groups: set[tuple[str, str]] = field(default_factory=set)
    """(partition, file id) of every data file group written or replaced."""
    new_files: dict[tuple[str, str], str] = field(default_factory=dict)
    """(partition, base file name) → path of every base file written."""
    deleted_files: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Partition → names of the files cleans deleted."""
    partitions: set[str] = field(default_factory=set)


def changes_of(timeline: Timeline, instants: Sequence[Instant]) -> Changes:
    """The changes of `instants` from their metadata. A rollback (of a pending instant)
    changes nothing; any other action but writes and cleans is refused."""
    changes = Changes()
    for instant in instants:
        if instant.action is Action.ROLLBACK:
            continue
        if instant.action is Action.CLEAN:
            metadata = timeline.clean_metadata(instant)
            for partition, cleaned in (metadata.get("partitionMetadata") or {}).items():
                names = {posixpath.basename(p) for p in cleaned.get("deletePathPatterns") or []}
                changes.deleted_files[str(partition)] |= names
                changes.partitions.add(str(partition))
            continue
        if instant.action not in WRITE_ACTIONS:
            raise ValueError(
                f"instant {instant.requested_time} ({instant.action}) is not applied by a "
                "catch-up: only commits, delta commits, replace commits and cleans are"
            )
        commit = timeline.commit_metadata(instant)
        for partition, stats in commit.partition_to_write_stats.items():
            changes.partitions.add(partition)
            for stat in stats:
                _add_write(changes, partition, stat)
        if isinstance(commit, ReplaceCommitMetadata):
            for partition, ids in commit.partition_to_replace_file_ids.items():
                changes.partitions.add(partition)
                changes.file_groups |= {(partition, file_id) for file_id in ids}
    return changes


def _add_write(changes: Changes, partition: str, stat: WriteStat) -> None:
    if stat.file_id:
        changes.file_groups.add((partition, stat.file_id))
    name = posixpath.basename(stat.path or "")
    if name and BaseFileName.parse(name) is not None:
        changes.new_files[(partition, name)] = stat.path or ""
