"""Trigger policies: when a table's counters turn into table service operations.

The decision is a pure function of a table's counters, policy, settings, what is already
pending and the time (`due_triggers`), so it is tested without a database; `apply_triggers`
runs it inside the transaction that stored the notifications (or that a pull read the
table's timeline in, with or without new commits: that is how time-based triggers reach a
table that went quiet). The tables' rows are locked before their counters are read, so two
transactions decide for one table one after the other and never both create the same
operation (the partial unique index on plan-less operations backs this up).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

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
from tms.store import Action, CountedTable, Operation, TableType, reset_counter, submit_operation

if TYPE_CHECKING:
    from tms.config import Settings

__all__ = [
    "LOCK_PARAMS",
    "POLICY_KEYS",
    "POLICY_PARAMS",
    "TABLE_WIDE_PARAMS",
    "Thresholds",
    "Trigger",
    "apply_triggers",
    "conditions_for",
    "due_triggers",
    "policy_params",
    "table_wide_params",
    "thresholds_for",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trigger:
    """One action that is due, and why (recorded as the operation's first event)."""

    action: Action
    reason: str


def conditions_for(
    policy: Mapping[str, Any], defaults: Thresholds, *, tbl_id: int | None = None
) -> dict[Action, Condition]:
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
    """The actions to create for `table` now, in a fixed order (compaction, clustering,
    clean, metadata compaction), each with its reason.

    Nothing for a paused table, nothing for an action that is not enabled or already
    pending. Compaction only for merge-on-read tables; a table whose type is still unknown
    counts as one, since only merge-on-read tables make delta commits.
    """
    if table.paused:
        return []
    conditions = conditions_for(table.policy, defaults, tbl_id=table.id)
    due: list[Trigger] = []
    for action in TRIGGER_ACTIONS:
        if action not in table.enabled_actions or action in table.pending_actions:
            continue
        if action is Action.COMPACTION and table.table_type is TableType.COPY_ON_WRITE:
            continue
        reason = conditions[action].evaluate(table, now)
        if reason:
            due.append(Trigger(action, f"policy: {reason}"))
    return due


def apply_triggers(
    session: Session,
    tables: Iterable[CountedTable],
    settings: Settings,
    *,
    now: datetime | None = None,
) -> dict[int, list[Operation]]:
    """Create the operations that the tables' counters and clocks make due at `now`
    (default: the current UTC time), in the caller's transaction (the one that counted or
    read the counters, so `pending_actions` are still current: the table rows are locked);
    per table id, the operations created.

    Each is plan-less (its job schedules the plan) and due now, with the table's queue and
    priority; the counters it watches restart at zero and its clock at now.
    """
    when = datetime.now(UTC) if now is None else now
    if when.tzinfo is None:  # the store's times are aware; a naive time is taken as UTC
        when = when.replace(tzinfo=UTC)
    defaults = Thresholds.from_settings(settings)
    created: dict[int, list[Operation]] = {}
    for table in sorted(tables, key=lambda t: t.id):
        for trigger in due_triggers(table, defaults, when):
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
