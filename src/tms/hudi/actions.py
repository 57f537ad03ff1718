"""The table-service actions, as Hudi names them on the timeline and in its configs.

The one list: the service registry (`tms.services.registry`), the job, the CLI and the store's
`Action` enum (checked against it by a test) all follow it.
"""

from __future__ import annotations

__all__ = [
    "CLEAN",
    "CLUSTERING",
    "COMPACTION",
    "INDEXING",
    "METADATA_COMPACTION",
    "TABLE_SERVICE_ACTIONS",
]

COMPACTION = "compaction"
CLUSTERING = "clustering"
CLEAN = "clean"
METADATA_COMPACTION = "metadata-compaction"
"""Compaction of the metadata table (`.hoodie/metadata`), which Hudi's writers otherwise do."""
INDEXING = "indexing"
"""Building (or dropping) metadata table partitions of an existing table (RFC-45)."""

TABLE_SERVICE_ACTIONS: tuple[str, ...] = (
    COMPACTION,
    CLUSTERING,
    CLEAN,
    METADATA_COMPACTION,
    INDEXING,
)
"""The table services tms runs, in the order they are listed everywhere."""
