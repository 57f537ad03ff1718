"""`apply_triggers` in a real transaction: a time trigger creates its operation at a later
check of the table that brings no new commit (what the pull path does for a quiet table)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlalchemy.orm import Session

from tests.store.helpers import make_table, record
from tms.application import apply_triggers
from tms.config import load_settings
from tms.store import (
    OperationStatus,
    ServiceAction,
    TableType,
    get_table,
    list_events,
    list_operations,
)
from tms.store.pulls import counted_tables

TIMED = {"triggers": {"compaction": {"any": [{"delta_commits": 10}, {"elapsed_hours": 24}]}}}


def test_a_time_trigger_creates_its_operation_without_a_new_commit(session: Session) -> None:
    settings = load_settings(config_file=False, environ={})
    table = make_table(session, table_type=TableType.MERGE_ON_READ, policy=TIMED)
    counted = record(session, table.id, "20260101000000001", "deltacommit")
    assert counted is not None and counted.created_at is not None
    registered = counted.created_at
    assert apply_triggers(session, [counted], settings) == {}  # one commit, just registered

    # A day later the table is read again (no notification since): same counters, due now.
    (quiet,) = counted_tables(session, [table.id])
    assert quiet.delta_commits_since_compaction == 1
    early = registered + timedelta(hours=23, minutes=59)
    assert apply_triggers(session, [quiet], settings, now=early) == {}
    later = registered + timedelta(hours=24, minutes=30)
    (operation,) = apply_triggers(session, [quiet], settings, now=later)[table.id]
    assert (operation.action, operation.status) == (
        ServiceAction.COMPACTION,
        OperationStatus.SCHEDULED,
    )
    assert operation.instant is None
    (event,) = list_events(session, operation.id)
    assert event.reason == (
        "policy: 24.5 hours since the table was registered (threshold 24), 1 new delta commit"
    )

    # Its counters and clock restarted: no new commit, nothing more however late.
    session.expire_all()
    stored = get_table(session, table.id)
    assert stored.delta_commits_since_compaction == 0
    assert stored.last_compaction_at is not None
    (after,) = counted_tables(session, [table.id])
    assert ServiceAction.COMPACTION in after.pending_actions
    much_later = later + timedelta(days=30)
    assert apply_triggers(session, [after], settings, now=much_later) == {}
    # Even once that compaction is no longer pending, a clock without a new commit waits.
    done = replace(after, pending_actions=frozenset())
    assert apply_triggers(session, [done], settings, now=much_later) == {}
    assert len(list_operations(session, tbl_id=table.id)) == 1
