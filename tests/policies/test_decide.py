"""`due_triggers`: which actions a table's conditions make due, under the rules every
strategy shares (paused, not enabled, pending, copy-on-write, order), and the default of a
table without `triggers`: today's count thresholds."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.policies.tables import ALL, NOW, hours_ago, table
from tms.policies import Thresholds, Trigger, due_triggers
from tms.store import CountedTable, ServiceAction, TableType

DEFAULTS = Thresholds(
    compaction_delta_commits=5,
    clean_commits=10,
    clustering_commits=3,
    metadata_compaction_delta_commits=10,
    log_compaction_delta_commits=4,
)
EVERYTHING_DUE: dict[str, Any] = {
    "delta_commits_since_compaction": 50,
    "commits_since_clean": 50,
    "commits_since_clustering": 50,
    "commits_since_metadata_compaction": 50,
    "delta_commits_since_log_compaction": 50,
}


def due(counted: CountedTable, defaults: Thresholds = DEFAULTS) -> list[ServiceAction]:
    return [t.action for t in due_triggers(counted, defaults, NOW)]


def test_order_is_compaction_log_compaction_clustering_clean_metadata_compaction() -> None:
    assert due(table(**EVERYTHING_DUE)) == [
        ServiceAction.COMPACTION,
        ServiceAction.LOG_COMPACTION,
        ServiceAction.CLUSTERING,
        ServiceAction.CLEAN,
        ServiceAction.METADATA_COMPACTION,
    ]
    assert due(table(**EVERYTHING_DUE)) == ALL  # the order the shared fixture lists


def test_paused_not_enabled_and_pending_actions_are_skipped() -> None:
    assert due(table(paused=True, **EVERYTHING_DUE)) == []
    assert due(table(enabled_actions=[ServiceAction.CLEAN], **EVERYTHING_DUE)) == [
        ServiceAction.CLEAN
    ]
    pending = frozenset({ServiceAction.COMPACTION, ServiceAction.METADATA_COMPACTION})
    assert due(table(pending_actions=pending, **EVERYTHING_DUE)) == [
        ServiceAction.LOG_COMPACTION,  # each action's own pending operation holds it back
        ServiceAction.CLUSTERING,
        ServiceAction.CLEAN,
    ]
    pending = frozenset({ServiceAction.LOG_COMPACTION})
    assert due(table(pending_actions=pending, **EVERYTHING_DUE)) == [
        ServiceAction.COMPACTION,
        ServiceAction.CLUSTERING,
        ServiceAction.CLEAN,
        ServiceAction.METADATA_COMPACTION,
    ]


def test_the_rules_hold_for_configured_strategies_too() -> None:
    timed = {
        "triggers": {
            "compaction": {"elapsed_hours": 1},
            "clean": {"any": [{"elapsed_hours": 1}, {"commits": 1}]},
        }
    }
    stale = {
        "policy": timed,
        "delta_commits_since_compaction": 1,
        "commits_since_clean": 1,
        "last_run_at": {ServiceAction.COMPACTION: hours_ago(5), ServiceAction.CLEAN: hours_ago(5)},
        "enabled_actions": [ServiceAction.COMPACTION, ServiceAction.CLEAN],
    }
    assert due(table(**stale)) == [ServiceAction.COMPACTION, ServiceAction.CLEAN]
    assert due(table(**{**stale, "paused": True})) == []
    assert due(table(**{**stale, "enabled_actions": [ServiceAction.CLEAN]})) == [
        ServiceAction.CLEAN
    ]
    assert due(table(**{**stale, "pending_actions": frozenset({ServiceAction.CLEAN})})) == [
        ServiceAction.COMPACTION
    ]
    assert due(table(**{**stale, "table_type": TableType.COPY_ON_WRITE})) == [ServiceAction.CLEAN]


def test_compaction_never_for_copy_on_write_whatever_its_trigger() -> None:
    cow = TableType.COPY_ON_WRITE
    log_heavy = {"triggers": {"compaction": {"log_files": 1}}}
    assert due(table(table_type=cow, log_files_since_compaction=9, policy=log_heavy)) == []
    assert due(table(table_type=cow, delta_commits_since_compaction=9)) == []
    # Only merge-on-read tables make delta commits: an unknown type counts as one.
    assert due(table(table_type=None, delta_commits_since_compaction=9)) == [
        ServiceAction.COMPACTION
    ]


def test_log_compaction_never_for_copy_on_write_whatever_its_trigger() -> None:
    cow = TableType.COPY_ON_WRITE
    counted = table(table_type=cow, delta_commits_since_log_compaction=9)
    assert due(counted) == []
    assert due(replace(counted, policy={"triggers": {"logcompaction": {"delta_commits": 1}}})) == []
    assert due(replace(counted, table_type=TableType.MERGE_ON_READ)) == [
        ServiceAction.LOG_COMPACTION
    ]
    # Only merge-on-read tables make delta commits: an unknown type counts as one.
    assert due(replace(counted, table_type=None)) == [ServiceAction.LOG_COMPACTION]


def test_log_compaction_is_due_after_its_delta_commits_when_enabled() -> None:
    enabled = [ServiceAction.LOG_COMPACTION]
    counted = table(enabled_actions=enabled, delta_commits_since_log_compaction=3)
    assert due_triggers(counted, DEFAULTS, NOW) == []
    at = replace(counted, delta_commits_since_log_compaction=4)
    assert due_triggers(at, DEFAULTS, NOW) == [
        Trigger(
            ServiceAction.LOG_COMPACTION,
            "policy: 4 delta commits since the last log compaction or compaction (threshold 4)",
        )
    ]
    # Its own counter decides, not compaction's.
    other = replace(counted, delta_commits_since_compaction=40)
    assert due(other) == []
    # Not enabled, already pending, threshold 0 (the setting's default) or paused: not due.
    assert due(replace(at, enabled_actions=[ServiceAction.COMPACTION])) == []
    assert due(replace(at, pending_actions=frozenset(enabled))) == []
    assert due(at, replace(DEFAULTS, log_compaction_delta_commits=0)) == []
    assert due(replace(at, paused=True)) == []
    # The table's policy key overrides the setting; 0 turns it off for the table.
    assert due(replace(at, policy={"log_compaction_delta_commits": 5})) == []
    assert due(replace(at, policy={"log_compaction_delta_commits": 2})) == enabled
    assert due(replace(at, policy={"log_compaction_delta_commits": 0})) == []
    on = {"log_compaction_delta_commits": 4}
    assert due(replace(at, policy=on), replace(DEFAULTS, log_compaction_delta_commits=0)) == enabled


def test_every_trigger_reason_starts_with_policy() -> None:
    triggers = due_triggers(table(delta_commits_since_compaction=7), DEFAULTS, NOW)
    assert triggers == [
        Trigger(
            ServiceAction.COMPACTION,
            "policy: 7 delta commits since the last compaction (threshold 5)",
        )
    ]


def _today(counts: Sequence[int], thresholds: Thresholds) -> list[Trigger]:
    """The count rule of the policies before strategies, written out as it was."""
    rules = (
        (ServiceAction.COMPACTION, thresholds.compaction_delta_commits, counts[0],
         "delta commits since the last compaction"),
        (ServiceAction.LOG_COMPACTION, thresholds.log_compaction_delta_commits, counts[4],
         "delta commits since the last log compaction or compaction"),
        (ServiceAction.CLUSTERING, thresholds.clustering_commits, counts[2],
         "commits since the last clustering"),
        (ServiceAction.CLEAN, thresholds.clean_commits, counts[1], "commits since the last clean"),
        (ServiceAction.METADATA_COMPACTION, thresholds.metadata_compaction_delta_commits, counts[3],
         "metadata table delta commits since the last metadata compaction"),
    )  # fmt: skip
    return [
        Trigger(action, f"policy: {count} {what} (threshold {threshold})")
        for action, threshold, count, what in rules
        if threshold > 0 and count >= threshold
    ]


@pytest.mark.parametrize(
    "thresholds",
    [
        DEFAULTS,
        Thresholds(0, 0, 0, 0, 0),
        Thresholds(1, 1, 1, 1, 1),
        Thresholds(5, 10, 0),
        Thresholds(0, 0, 0, 0, log_compaction_delta_commits=6),
    ],
)
def test_without_triggers_the_count_thresholds_decide_as_before(thresholds: Thresholds) -> None:
    values = (0, 1, 3, 4, 5, 6, 9, 10, 11)
    for counts in itertools.product(values, values, values, values, (0, 3, 4, 6, 11)):
        counted = table(
            delta_commits_since_compaction=counts[0],
            commits_since_clean=counts[1],
            commits_since_clustering=counts[2],
            commits_since_metadata_compaction=counts[3],
            delta_commits_since_log_compaction=counts[4],
            # Time and sizes do not matter to a table without triggers.
            log_bytes_since_compaction=1 << 40,
            log_files_since_compaction=1000,
            small_files_since_clustering={"p": 1000},
            created_at=hours_ago(10**5),
        )
        assert due_triggers(counted, thresholds, NOW) == _today(counts, thresholds), counts


def test_the_old_policy_keys_still_override_the_settings() -> None:
    policy = {"compaction_delta_commits": 2, "clean_commits": 0}
    counted = table(policy=policy, delta_commits_since_compaction=2, commits_since_clean=99)
    assert due(counted) == [ServiceAction.COMPACTION]


def test_a_triggers_entry_replaces_only_its_actions_count() -> None:
    policy = {"clean_commits": 4, "triggers": {"compaction": {"log_files": 20}}}
    counted = table(
        policy=policy,
        delta_commits_since_compaction=50,  # far past the default of 5: no longer counts
        log_files_since_compaction=19,
        commits_since_clean=4,
    )
    assert due(counted) == [ServiceAction.CLEAN]
    assert due(replace(counted, log_files_since_compaction=20)) == [
        ServiceAction.COMPACTION,
        ServiceAction.CLEAN,
    ]


def test_a_time_trigger_fires_without_a_new_notification() -> None:
    """What a pull sees for a table that went quiet: the same counters as at its last
    commit, a later clock."""
    policy = {"triggers": {"compaction": {"any": [{"delta_commits": 5}, {"elapsed_hours": 6}]}}}
    counted = table(
        policy=policy,
        delta_commits_since_compaction=2,
        last_run_at={ServiceAction.COMPACTION: NOW},
    )
    assert due_triggers(counted, DEFAULTS, NOW + timedelta(hours=5)) == []
    (trigger,) = due_triggers(counted, DEFAULTS, NOW + timedelta(hours=6))
    assert trigger.reason == (
        "policy: 6.0 hours since the last compaction (threshold 6), 2 new delta commits"
    )


def test_an_unusable_stored_spec_falls_back_to_the_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = {"triggers": {"compaction": {"elapsed_days": 1}}}
    with caplog.at_level(logging.WARNING, "tms.policies.triggers"):
        assert due(table(id=7, policy=broken, delta_commits_since_compaction=5)) == [
            ServiceAction.COMPACTION
        ]
    assert "table 7" in caplog.text and "compaction: unknown strategy" in caplog.text
