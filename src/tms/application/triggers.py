"""The operations trigger policies make due, created.

`apply_triggers` runs the policies' decision (`tms.policies.due_triggers`) inside the
transaction that stored the notifications (or that a pull read the table's timeline in, with
or without new commits: that is how time-based triggers reach a table that went quiet). The
tables' rows are locked before their counters are read, so two transactions decide for one
table one after the other and never both create the same operation (the partial unique index
on plan-less operations backs this up).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from tms.application.chosen_executor import chosen_executor
from tms.config import Settings
from tms.policies import Thresholds, due_triggers
from tms.policies.params import policy_params
from tms.store import CountedTable, Operation, reset_counter, submit_operation

__all__ = ["apply_triggers"]


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

    Each is plan-less (its job schedules the plan) and due now, with the table's queue,
    priority and executor (its policy's, else the setting); the counters it watches
    restart at zero and its clock at now.
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
                executor=chosen_executor(None, table.policy, settings),
                max_retries=settings.default_max_retries,
                reason=trigger.reason,
            )
            if submitted.created:
                reset_counter(session, tbl_id, trigger.action)
                created.setdefault(tbl_id, []).append(submitted.operation)
    return created
