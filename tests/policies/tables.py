"""`CountedTable` values built directly: the policies read nothing else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tms.store import CountedTable, ServiceAction, TableType

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REGISTERED = NOW - timedelta(days=30)
ALL = [
    ServiceAction.COMPACTION,
    ServiceAction.LOG_COMPACTION,
    ServiceAction.CLUSTERING,
    ServiceAction.CLEAN,
    ServiceAction.METADATA_COMPACTION,
]


def table(**fields: Any) -> CountedTable:
    """A merge-on-read table registered 30 days before `NOW` with every policy action
    enabled, nothing pending and every counter at zero, but for `fields`."""
    values: dict[str, Any] = {
        "id": 1,
        "table_type": TableType.MERGE_ON_READ,
        "enabled_actions": ALL,
        "paused": False,
        "policy": {},
        "delta_commits_since_compaction": 0,
        "commits_since_clean": 0,
        "commits_since_clustering": 0,
        "commits_since_metadata_compaction": 0,
        "delta_commits_since_log_compaction": 0,
        "pending_actions": frozenset(),
        "created_at": REGISTERED,
    }
    values.update(fields)
    return CountedTable(**values)


def hours_ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)
