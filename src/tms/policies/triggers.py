"""Trigger policies: when a table's counters make a table service due.

The decision is a pure function of a table's counters, policy, settings, what is already
pending and the time (`due_triggers`), so it is tested without a database;
`tms.application.triggers` creates the operations it makes due.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tms.policies.defaults import POLICY_KEYS, Thresholds, default_conditions, thresholds_for
from tms.policies.params import (
    LOCK_PARAMS,
    POLICY_PARAMS,
    TABLE_WIDE_PARAMS,
    policy_params,
    table_wide_params,
)
from tms.policies.spec import TRIGGER_ACTIONS, parse_triggers
from tms.policies.strategy import Condition, SpecError
from tms.store import CountedTable, ServiceAction, TableType

__all__ = [
    "LOCK_PARAMS",
    "POLICY_KEYS",
    "POLICY_PARAMS",
    "TABLE_WIDE_PARAMS",
    "Thresholds",
    "Trigger",
    "conditions_for",
    "due_triggers",
    "policy_params",
    "table_wide_params",
    "thresholds_for",
]

log = logging.getLogger(__name__)

_MERGE_ON_READ_ONLY = frozenset({ServiceAction.COMPACTION, ServiceAction.LOG_COMPACTION})
"""Actions that merge log files, which only merge-on-read tables have."""
_NEEDS_POLICY_KEY = {ServiceAction.PARTITION_TTL: "ttl_days"}
"""Actions whose policy-made operations cannot plan without a setting of the table's policy
(a partition TTL without its days): off for a table that does not set it."""


@dataclass(frozen=True)
class Trigger:
    """One action that is due, and why (recorded as the operation's first event)."""

    action: ServiceAction
    reason: str


def conditions_for(
    policy: Mapping[str, Any], defaults: Thresholds, *, tbl_id: int | None = None
) -> dict[ServiceAction, Condition]:
    """Per action, what makes it due for a table with `policy`: its `triggers` entry, else
    the count threshold (the policy's old key, else the service's).

    A stored spec this version cannot use (written before validation, or by hand) is
    logged and the table falls back to the count thresholds, rather than failing the
    transaction that stores the table's commits."""
    conditions = default_conditions(thresholds_for(policy, defaults))
    if "triggers" in policy:
        try:
            conditions.update(parse_triggers(policy["triggers"]))
        except SpecError as exc:
            log.warning("table %s: unusable policy triggers, using counts: %s", tbl_id, exc)
    return conditions


def due_triggers(table: CountedTable, defaults: Thresholds, now: datetime) -> list[Trigger]:
    """The actions to create for `table` now, in a fixed order (compaction, log compaction,
    clustering, clean, metadata compaction, archival, partition TTL), each with its reason.

    Nothing for a paused table, nothing for an action that is not enabled or already
    pending. Compaction and log compaction only for merge-on-read tables; a table whose type
    is still unknown counts as one, since only merge-on-read tables make delta commits.
    Partition TTL only for a table whose policy sets its `ttl_days`.
    """
    if table.paused:
        return []
    conditions = conditions_for(table.policy, defaults, tbl_id=table.id)
    due: list[Trigger] = []
    for action in TRIGGER_ACTIONS:
        if action not in table.enabled_actions or action in table.pending_actions:
            continue
        if action in _MERGE_ON_READ_ONLY and table.table_type is TableType.COPY_ON_WRITE:
            continue
        needed = _NEEDS_POLICY_KEY.get(action)
        if needed is not None and table.policy.get(needed) is None:
            continue
        reason = conditions[action].evaluate(table, now)
        if reason:
            due.append(Trigger(action, f"policy: {reason}"))
    return due
