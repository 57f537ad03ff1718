"""The table-service actions, as Hudi names them on the timeline and in its configs.

The one list: the service registry (`tms.services.registry`), the job, the CLI and the store's
`Action` enum (checked against it by a test) all follow it.
"""

from __future__ import annotations

__all__ = [
    "ACTION_ALIASES",
    "ARCHIVAL",
    "CLEAN",
    "CLUSTERING",
    "COMPACTION",
    "INDEXING",
    "LOG_COMPACTION",
    "METADATA_COMPACTION",
    "PARTITION_TTL",
    "PLANNED_ACTIONS",
    "TABLE_SERVICE_ACTIONS",
    "action_named",
]

COMPACTION = "compaction"
CLUSTERING = "clustering"
CLEAN = "clean"
METADATA_COMPACTION = "metadata-compaction"
"""Compaction of the metadata table (`.hoodie/metadata`), which Hudi's writers otherwise do."""
INDEXING = "indexing"
"""Building (or dropping) metadata table partitions of an existing table (RFC-45)."""
LOG_COMPACTION = "logcompaction"
"""Merging a file slice's log blocks into one new log file (Hudi's `logcompaction`, RFC-48):
the slice keeps its base file, and readers merge fewer blocks."""
ARCHIVAL = "archival"
"""Moving old completed instants out of the active timeline (Hudi's archiver,
`TableServiceType.ARCHIVE`): a service name, not an action on the timeline (archival writes
no instant)."""
PARTITION_TTL = "partition_ttl"
"""Deleting the partitions whose last commit is older than a number of days (Hudi 1.x's
partition TTL): a service name; on the timeline a `replacecommit` of operation
`DELETE_PARTITION`, whose replaced file groups the cleaner removes afterwards."""

TABLE_SERVICE_ACTIONS: tuple[str, ...] = (
    COMPACTION,
    CLUSTERING,
    CLEAN,
    METADATA_COMPACTION,
    INDEXING,
    LOG_COMPACTION,
    ARCHIVAL,
    PARTITION_TTL,
)
"""The table services tms runs, in the order they are listed everywhere."""

PLANNED_ACTIONS: tuple[str, ...] = (COMPACTION, CLUSTERING)
"""The table services whose plan is an instant on the timeline before it runs and stays
there through a rollback: the plans RFC-79 lets a writer or an operator cancel."""

ACTION_ALIASES = {
    "compact": COMPACTION,
    "cluster": CLUSTERING,
    "index": INDEXING,
    "logcompact": LOG_COMPACTION,
}
"""RFC-43's path words for the actions, accepted wherever an action is named (`logcompact`
after them: RFC-43 predates log compaction)."""


def action_named(text: str) -> str | None:
    """The action `text` names (case-insensitive, an alias too), or None for no action."""
    name = text.strip().lower()
    name = ACTION_ALIASES.get(name, name)
    return name if name in TABLE_SERVICE_ACTIONS else None
