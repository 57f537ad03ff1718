"""What a table without a `triggers` entry for an action gets: the commit count threshold
of its old policy key, else the service's setting (0 = never), as before strategies; for
partition TTL, the interval of its `ttl_interval_hours`, else a day."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tms.policies.strategies.commits import Commits
from tms.policies.strategies.delta_commits import DeltaCommits
from tms.policies.strategies.interval import Interval
from tms.policies.strategy import Condition
from tms.store import ServiceAction

if TYPE_CHECKING:
    from tms.config import Settings

__all__ = [
    "ARCHIVAL_COMMITS",
    "COUNT_KEYS",
    "POLICY_KEYS",
    "TRIGGER_KEYS",
    "TTL_INTERVAL_HOURS",
    "Thresholds",
    "default_conditions",
    "thresholds_for",
]

HUDI_KEEP_MIN = 20
HUDI_KEEP_MAX = 30
"""Hudi's `hoodie.keep.min.commits` and `hoodie.keep.max.commits`."""
ARCHIVAL_COMMITS = HUDI_KEEP_MAX - HUDI_KEEP_MIN + 1
"""Writes after which an archival is due for a table that enables it: Hudi archives once the
active timeline holds more than keep.max completed commits, down to keep.min, so the next is
due keep.max - keep.min + 1 commits after one (of the table policy's `archival_keep_min` and
`archival_keep_max`, else Hudi's)."""
TTL_INTERVAL_HOURS = 24.0
"""Hours between the partition TTLs the policy creates for a table that sets its `ttl_days`
(unless it sets `ttl_interval_hours`): partitions age by the day."""

POLICY_KEYS = (
    "compaction_delta_commits",
    "clean_commits",
    "clustering_commits",
    "metadata_compaction_delta_commits",
    "log_compaction_delta_commits",
    "archival_commits",
)
"""Per-table overrides `tbl.policy` may hold; each is a commit count, 0 turns it off."""

COUNT_KEYS = {
    ServiceAction.COMPACTION: "compaction_delta_commits",
    ServiceAction.CLUSTERING: "clustering_commits",
    ServiceAction.CLEAN: "clean_commits",
    ServiceAction.METADATA_COMPACTION: "metadata_compaction_delta_commits",
    ServiceAction.LOG_COMPACTION: "log_compaction_delta_commits",
    ServiceAction.ARCHIVAL: "archival_commits",
}
"""The policy key of each action's count threshold, which a `triggers` entry replaces."""

TRIGGER_KEYS = {**COUNT_KEYS, ServiceAction.PARTITION_TTL: "ttl_interval_hours"}
"""The policy key of each action's default condition (a count threshold, or partition
TTL's interval in hours), which a `triggers` entry replaces."""


@dataclass(frozen=True)
class Thresholds:
    """Commits after which each action is due, and hours between the partition TTLs of
    tables that set one; 0 means never."""

    compaction_delta_commits: int
    clean_commits: int
    clustering_commits: int
    metadata_compaction_delta_commits: int = 0
    log_compaction_delta_commits: int = 0
    archival_commits: int = ARCHIVAL_COMMITS
    ttl_interval_hours: float = TTL_INTERVAL_HOURS

    @classmethod
    def from_settings(cls, settings: Settings) -> Thresholds:
        return cls(
            settings.compaction_delta_commits,
            settings.clean_commits,
            settings.clustering_commits,
            settings.metadata_compaction_delta_commits,
            settings.log_compaction_delta_commits,
        )


def thresholds_for(policy: Mapping[str, Any], defaults: Thresholds) -> Thresholds:
    """The table's overrides on top of the service defaults (unknown keys are ignored here;
    the API refuses them when they are set)."""

    def pick(key: str, default: int) -> int:
        value = policy.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    return Thresholds(
        pick("compaction_delta_commits", defaults.compaction_delta_commits),
        pick("clean_commits", defaults.clean_commits),
        pick("clustering_commits", defaults.clustering_commits),
        pick("metadata_compaction_delta_commits", defaults.metadata_compaction_delta_commits),
        pick("log_compaction_delta_commits", defaults.log_compaction_delta_commits),
        pick("archival_commits", _archival_commits(policy, defaults.archival_commits)),
        _hours(policy.get("ttl_interval_hours"), defaults.ttl_interval_hours),
    )


def _hours(value: Any, default: float) -> float:
    """A policy's hours (a whole number or a fraction), else `default`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


def _archival_commits(policy: Mapping[str, Any], default: int) -> int:
    """keep.max - keep.min + 1 of the policy's archival keep settings (Hudi's for the one it
    does not set); `default` when it sets neither."""
    low, high = policy.get("archival_keep_min"), policy.get("archival_keep_max")
    if not isinstance(low, int) and not isinstance(high, int):
        return default
    low = low if isinstance(low, int) else HUDI_KEEP_MIN
    high = high if isinstance(high, int) else HUDI_KEEP_MAX
    return max(high - low + 1, 1)


def default_conditions(thresholds: Thresholds) -> dict[ServiceAction, Condition]:
    """The count strategies the thresholds stand for, one per action (partition TTL's
    interval)."""
    return {
        ServiceAction.COMPACTION: DeltaCommits(
            ServiceAction.COMPACTION, thresholds.compaction_delta_commits
        ),
        ServiceAction.CLUSTERING: Commits(ServiceAction.CLUSTERING, thresholds.clustering_commits),
        ServiceAction.CLEAN: Commits(ServiceAction.CLEAN, thresholds.clean_commits),
        ServiceAction.METADATA_COMPACTION: DeltaCommits(
            ServiceAction.METADATA_COMPACTION, thresholds.metadata_compaction_delta_commits
        ),
        ServiceAction.LOG_COMPACTION: DeltaCommits(
            ServiceAction.LOG_COMPACTION, thresholds.log_compaction_delta_commits
        ),
        ServiceAction.ARCHIVAL: Commits(ServiceAction.ARCHIVAL, thresholds.archival_commits),
        ServiceAction.PARTITION_TTL: Interval(
            ServiceAction.PARTITION_TTL, thresholds.ttl_interval_hours
        ),
    }
