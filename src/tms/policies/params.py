"""The table policy keys that become parameters of the table's operations: planning
parameters of policy-made operations, lock settings, table-wide defaults of every
operation, and the executor of its operations that do not name one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tms.executor_choice import ExecutorChoice, parse_executor
from tms.store import ServiceAction

__all__ = [
    "EXECUTOR_KEY",
    "LOCK_PARAMS",
    "POLICY_PARAMS",
    "TABLE_WIDE_PARAMS",
    "policy_executor",
    "policy_params",
    "table_wide_params",
]


POLICY_PARAMS: dict[ServiceAction, dict[str, str]] = {
    ServiceAction.COMPACTION: {
        "compaction_strategy": "strategy",
        "compaction_cancellable": "cancellable",
    },
    ServiceAction.CLEAN: {
        "clean_policy": "policy",
        "clean_retained": "retained",
        "clean_cancel_plans_after_hours": "cancel_plans_after_hours",
        "clean_cancel_plans_after_instants": "cancel_plans_after_instants",
        "clean_rollback_failed_writes": "rollback_failed_writes",
    },
    ServiceAction.CLUSTERING: {
        "clustering_sort_columns": "sort_columns",
        "clustering_target_file_size": "target_file_size",
        "clustering_cancellable": "cancellable",
    },
    ServiceAction.LOG_COMPACTION: {
        "log_compaction_blocks_threshold": "log_blocks_threshold",
    },
    ServiceAction.ARCHIVAL: {
        "archival_keep_min": "keep_min",
        "archival_keep_max": "keep_max",
    },
    ServiceAction.PARTITION_TTL: {
        "ttl_days": "ttl_days",
        "ttl_partitions": "ttl_partitions",
        "ttl_max_partitions": "ttl_max_partitions",
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


EXECUTOR_KEY = "executor"
"""The table policy key naming who runs the plans of the table's operations that do not
name an executor themselves (`tms.executor_choice`)."""


def policy_executor(policy: Mapping[str, Any]) -> ExecutorChoice | None:
    """The executor the table's policy chooses; None when it chooses none (the API refuses
    any other value, so one that does not parse was never set through it)."""
    value = policy.get(EXECUTOR_KEY)
    if value is None:
        return None
    try:
        return parse_executor(value)
    except ValueError:
        return None


def table_wide_params(policy: Mapping[str, Any], action: str) -> dict[str, Any]:
    """The parameters every operation of `action` on the table gets by default: the lock
    settings, and the planning parameters the policy sets table-wide."""
    locks = {key: policy[name] for name, key in LOCK_PARAMS.items() if policy.get(name) is not None}
    try:
        params = policy_params(policy, ServiceAction(action))
    except ValueError:
        return locks
    wide = {name: value for name, value in params.items() if name in TABLE_WIDE_PARAMS}
    return {**locks, **wide}


def policy_params(policy: Mapping[str, Any], action: ServiceAction) -> dict[str, Any]:
    """The planning parameters a policy-made operation of `action` carries (`extra_params`)."""
    return {
        param: policy[key]
        for key, param in POLICY_PARAMS.get(action, {}).items()
        if policy.get(key) is not None
    }
