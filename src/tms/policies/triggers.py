"""Trigger policies: when a stored commit turns into table service operations.

The decision is a pure function of a table's counters, settings and what is already pending
(`due_actions`), so it is tested without a database; `apply_triggers` runs it inside the
transaction that stored the notifications. The tables' rows are locked before their
counters are bumped, so two transactions decide for one table one after the other and never
both create the same operation (the partial unique index on plan-less operations backs this
up).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from tms.store import Action, CountedTable, Operation, TableType, reset_counter, submit_operation

if TYPE_CHECKING:
    from tms.config import Settings

__all__ = [
    "POLICY_KEYS",
    "Counters",
    "Thresholds",
    "Trigger",
    "apply_triggers",
    "due_actions",
    "thresholds_for",
]

POLICY_KEYS = (
    "compaction_delta_commits",
    "clean_commits",
    "clustering_commits",
    "metadata_compaction_delta_commits",
)
"""Per-table overrides `tbl.policy` may hold; each is a commit count, 0 turns it off."""


@dataclass(frozen=True)
class Thresholds:
    """Commits after which each action is due; 0 means never."""

    compaction_delta_commits: int
    clean_commits: int
    clustering_commits: int
    metadata_compaction_delta_commits: int = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> Thresholds:
        return cls(
            settings.compaction_delta_commits,
            settings.clean_commits,
            settings.clustering_commits,
            settings.metadata_compaction_delta_commits,
        )


@dataclass(frozen=True)
class Counters:
    """A table's commits since its last compaction, clean, clustering and metadata table
    compaction (each data table commit is one delta commit on the metadata table)."""

    delta_commits_since_compaction: int
    commits_since_clean: int
    commits_since_clustering: int
    commits_since_metadata_compaction: int = 0

    @classmethod
    def of(cls, table: CountedTable) -> Counters:
        return cls(
            table.delta_commits_since_compaction,
            table.commits_since_clean,
            table.commits_since_clustering,
            table.commits_since_metadata_compaction,
        )


@dataclass(frozen=True)
class Trigger:
    """One action that is due, and why (recorded as the operation's first event)."""

    action: Action
    reason: str


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
    )


POLICY_PARAMS: dict[Action, dict[str, str]] = {
    Action.COMPACTION: {"compaction_strategy": "strategy", "compaction_cancellable": "cancellable"},
    Action.CLEAN: {
        "clean_policy": "policy",
        "clean_retained": "retained",
        "clean_cancel_plans_after_hours": "cancel_plans_after_hours",
        "clean_cancel_plans_after_instants": "cancel_plans_after_instants",
        "clean_rollback_failed_writes": "rollback_failed_writes",
    },
    Action.CLUSTERING: {
        "clustering_sort_columns": "sort_columns",
        "clustering_target_file_size": "target_file_size",
        "clustering_cancellable": "cancellable",
    },
}
"""Per action, the table policy keys that become the job's planning parameters."""

TABLE_WIDE_PARAMS = frozenset({"cancellable"})
"""Planning parameters a table's policy sets for every operation of the table, submitted
ones too, unless the operation sets its own."""

LOCK_PARAMS: dict[str, str] = {
    "lock_provider": "hoodie.write.lock.provider",
    "lock_path": "hoodie.write.lock.filesystem.path",
    "lock_expire_minutes": "hoodie.write.lock.filesystem.expire",
}
"""The table policy keys that say how the table's writers lock it, for every operation."""


def table_wide_params(policy: Mapping[str, Any], action: str) -> dict[str, Any]:
    """The parameters every operation of `action` on the table gets by default: the lock
    settings, and the planning parameters the policy sets table-wide."""
    locks = {key: policy[name] for name, key in LOCK_PARAMS.items() if policy.get(name) is not None}
    try:
        params = policy_params(policy, Action(action))
    except ValueError:
        return locks
    wide = {name: value for name, value in params.items() if name in TABLE_WIDE_PARAMS}
    return {**locks, **wide}


def policy_params(policy: Mapping[str, Any], action: Action) -> dict[str, Any]:
    """The planning parameters a policy-made operation of `action` carries (`extra_params`)."""
    return {
        param: policy[key]
        for key, param in POLICY_PARAMS.get(action, {}).items()
        if policy.get(key) is not None
    }


def due_actions(
    *,
    table_type: TableType | None,
    enabled: Collection[Action],
    paused: bool,
    counters: Counters,
    thresholds: Thresholds,
    pending: Collection[Action],
) -> list[Trigger]:
    """The actions to create now, in a fixed order (compaction, clustering, clean, metadata
    compaction).

    Nothing for a paused table, nothing for an action that is not enabled or already
    pending. Compaction only for merge-on-read tables; a table whose type is still unknown
    counts as one, since only merge-on-read tables make delta commits.
    """
    if paused:
        return []
    rules = (
        (
            Action.COMPACTION,
            thresholds.compaction_delta_commits,
            counters.delta_commits_since_compaction,
            "delta commits since the last compaction",
        ),
        (
            Action.CLUSTERING,
            thresholds.clustering_commits,
            counters.commits_since_clustering,
            "commits since the last clustering",
        ),
        (
            Action.CLEAN,
            thresholds.clean_commits,
            counters.commits_since_clean,
            "commits since the last clean",
        ),
        (
            Action.METADATA_COMPACTION,
            thresholds.metadata_compaction_delta_commits,
            counters.commits_since_metadata_compaction,
            "metadata table delta commits since the last metadata compaction",
        ),
    )
    due: list[Trigger] = []
    for action, threshold, count, what in rules:
        if action not in enabled or action in pending or threshold <= 0 or count < threshold:
            continue
        if action is Action.COMPACTION and table_type is TableType.COPY_ON_WRITE:
            continue
        due.append(Trigger(action, f"policy: {count} {what} (threshold {threshold})"))
    return due


def apply_triggers(
    session: Session, tables: Iterable[CountedTable], settings: Settings
) -> dict[int, list[Operation]]:
    """Create the operations that the tables' counters make due, in the caller's
    transaction (the one that counted, so `pending_actions` are still current: the table
    rows are locked); per table id, the operations created.

    Each is plan-less (its job schedules the plan) and due now, with the table's queue and
    priority; the counter it watches restarts at zero.
    """
    defaults = Thresholds.from_settings(settings)
    created: dict[int, list[Operation]] = {}
    for table in sorted(tables, key=lambda t: t.id):
        due = due_actions(
            table_type=table.table_type,
            enabled=table.enabled_actions,
            paused=table.paused,
            counters=Counters.of(table),
            thresholds=thresholds_for(table.policy, defaults),
            pending=table.pending_actions,
        )
        for trigger in due:
            tbl_id = table.id
            submitted = submit_operation(
                session,
                tbl_id=tbl_id,
                action=trigger.action,
                instant=None,
                extra_params=policy_params(table.policy, trigger.action),
                max_retries=settings.default_max_retries,
                reason=trigger.reason,
            )
            if submitted.created:
                reset_counter(session, tbl_id, trigger.action)
                created.setdefault(tbl_id, []).append(submitted.operation)
    return created
