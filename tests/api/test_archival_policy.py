"""The archival policy: off unless a table enables `archival`; then due after keep.max -
keep.min + 1 writes since the policy's last archival (Hudi's 30 and 20, else the table
policy's `archival_keep_*`), counted by the store and restarted when the policy creates one,
whose operation carries the policy's keep settings."""

from __future__ import annotations

from sqlalchemy.orm import Session

from tests.api.test_policies import decide
from tests.store.helpers import make_table, record
from tms.application import apply_triggers
from tms.config import load_settings
from tms.policies import Thresholds, thresholds_for
from tms.policies.triggers import policy_params
from tms.store import ServiceAction, TableType, list_events

ON = (ServiceAction.ARCHIVAL,)
NONE = Thresholds(0, 0, 0)


def test_archival_is_due_after_keep_max_less_keep_min_plus_one_writes_when_enabled() -> None:
    assert NONE.archival_commits == 11  # Hudi's 30 - 20 + 1
    assert decide((0, 0, 0, 0, 0, 10), enabled=ON, thresholds=NONE) == []
    assert decide((0, 0, 0, 0, 0, 11), enabled=ON, thresholds=NONE) == list(ON)
    assert decide((0, 0, 0, 0, 0, 11), thresholds=NONE) == []  # not enabled (the default)
    assert decide((0, 0, 0, 0, 0, 11), enabled=ON, thresholds=NONE, pending=ON) == []
    cow = TableType.COPY_ON_WRITE
    assert decide((0, 0, 0, 0, 0, 11), enabled=ON, thresholds=NONE, table_type=cow) == list(ON)
    off = Thresholds(0, 0, 0, archival_commits=0)
    assert decide((0, 0, 0, 0, 0, 99), enabled=ON, thresholds=off) == []


def test_the_threshold_follows_the_policys_keep_settings_unless_it_sets_one() -> None:
    keep = {"archival_keep_min": 4, "archival_keep_max": 6}
    assert thresholds_for(keep, NONE).archival_commits == 3
    assert thresholds_for({"archival_keep_max": 25}, NONE).archival_commits == 6
    assert thresholds_for({**keep, "archival_commits": 8}, NONE).archival_commits == 8
    assert thresholds_for({"archival_commits": 0}, NONE).archival_commits == 0
    assert policy_params(keep, ServiceAction.ARCHIVAL) == {"keep_min": 4, "keep_max": 6}


def test_stored_writes_trigger_an_archival_that_restarts_its_counter(session: Session) -> None:
    settings = load_settings(config_file=False, environ={})
    table = make_table(
        session,
        table_type=TableType.COPY_ON_WRITE,
        enabled_actions=[ServiceAction.ARCHIVAL],
        policy={"archival_keep_min": 2, "archival_keep_max": 4},
    )
    for n in range(2):
        record(session, table.id, f"2026010100000000{n}", "commit")
    counted = record(session, table.id, "20260101000000002", "clean")  # not a write
    assert counted is not None and counted.commits_since_archival == 2
    assert apply_triggers(session, [counted], settings) == {}
    counted = record(session, table.id, "20260101000000003", "replacecommit")
    assert counted is not None
    created = apply_triggers(session, [counted], settings)[table.id]
    assert [op.action for op in created] == [ServiceAction.ARCHIVAL]
    assert created[0].extra_params == {"keep_min": 2, "keep_max": 4}
    (event,) = list_events(session, created[0].id)
    assert event.reason == "policy: 3 commits since the policy's last archival (threshold 3)"
    session.refresh(table)
    assert table.commits_since_archival == 0
