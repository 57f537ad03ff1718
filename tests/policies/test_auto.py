"""The `auto` trigger: decisions and their exact reasons from a table's latest measurement,
log compaction against compaction, a stale or missing measurement, and its targets' checks."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from tests.policies.tables import ALL, NOW, hours_ago, table
from tms.policies import SpecError, Thresholds, due_triggers, parse_condition
from tms.policies.auto_targets import DEFAULTS, Targets
from tms.store import CountedTable, Measured, ServiceAction, TableType

COMPACTION = ServiceAction.COMPACTION
LOG_COMPACTION = ServiceAction.LOG_COMPACTION
CLUSTERING = ServiceAction.CLUSTERING
CLEAN = ServiceAction.CLEAN
OFF = Thresholds(0, 0, 0)
BOTH_AUTO = {"triggers": {"compaction": {"auto": {}}, "logcompaction": {"auto": {}}}}


def layout(
    *,
    log_files: int = 9,
    log_bytes: int = 50_000_000,
    base_p50: int = 100_000_000,
    bases: int = 100,
    small: int = 10,
) -> dict[str, Any]:
    """A measured layout (`LayoutMeasurement.to_dict`'s keys the decision reads)."""
    return {
        "log_files_per_slice": {"count": bases, "p50": 2, "p95": log_files, "max": log_files},
        "log_bytes_per_slice": {"count": bases, "p50": 1, "p95": log_bytes, "max": log_bytes},
        "base_file_bytes": {"count": bases, "p5": 1, "p50": base_p50, "p95": base_p50},
        "small_file_limit": 104_857_600,
        "small_files": small,
    }


def measured(
    age: timedelta = timedelta(minutes=5), services: dict[str, Any] | None = None, **figures: Any
) -> Measured:
    return Measured(NOW - age, layout(**figures), {"commits": 10}, services or {})


def decide(spec: Any, action: ServiceAction, counted: CountedTable) -> str | None:
    return parse_condition({"auto": spec}, action, (action.value,)).evaluate(counted, NOW)


def test_compaction_is_due_over_the_target_with_its_expected_cost() -> None:
    costs = {"compaction": {"attempts": 2, "executor_seconds": 82.0}}
    counted = table(measurement=measured(services=costs))
    assert decide({"max_log_files_per_slice": 6}, COMPACTION, counted) == (
        "compacting: 9 log files per slice at p95, target 6; expected cost 41 executor-seconds"
    )
    # Through the policy path, as the operation's first event says it.
    policy = {"triggers": {"compaction": {"auto": {"max_log_files_per_slice": 6}}}}
    (trigger,) = due_triggers(table(policy=policy, measurement=measured()), OFF, NOW)
    assert (trigger.action, trigger.reason) == (
        COMPACTION,
        "policy: compacting: 9 log files per slice at p95, target 6; cost unknown",
    )


@pytest.mark.parametrize("p95", [0, 5, 6])
def test_compaction_is_not_due_at_or_under_the_target(p95: int) -> None:
    counted = table(measurement=measured(log_files=p95))
    assert decide({"max_log_files_per_slice": 6}, COMPACTION, counted) is None


def test_the_default_target_is_6_and_0_turns_it_off() -> None:
    expected = Targets(6, 0.1, 0.2, 24.0, 2700.0)
    assert expected == DEFAULTS
    assert decide({}, COMPACTION, table(measurement=measured(log_files=7)))
    assert decide({}, COMPACTION, table(measurement=measured(log_files=6))) is None
    off = {"max_log_files_per_slice": 0}
    assert decide(off, COMPACTION, table(measurement=measured(log_files=99))) is None


def test_no_measurement_or_a_stale_one_decides_nothing() -> None:
    assert decide({}, COMPACTION, table()) is None
    stale = measured(age=timedelta(seconds=2701))
    assert decide({}, COMPACTION, table(measurement=stale)) is None
    assert decide({}, COMPACTION, table(measurement=measured(age=timedelta(seconds=2700))))
    assert decide({"stale_after_seconds": 60}, COMPACTION, table(measurement=measured())) is None
    ancient = measured(age=timedelta(days=30))
    assert decide({"stale_after_seconds": 0}, COMPACTION, table(measurement=ancient))


def test_no_measurement_means_no_clean_either() -> None:
    counted = table(commits_since_clean=5, last_run_at={CLEAN: hours_ago(99)})
    assert decide({}, CLEAN, counted) is None


def test_log_compaction_instead_while_log_bytes_are_small_against_base_files() -> None:
    counted = table(policy=BOTH_AUTO, measurement=measured(log_bytes=5_000_000))
    assert decide({}, COMPACTION, counted) is None
    assert decide({}, LOG_COMPACTION, counted) == (
        "log compacting: 9 log files per slice at p95, target 6; 5000000 log bytes per slice "
        "at p95, 5.0% of the median base file (log compaction up to 10.0%); cost unknown"
    )
    (trigger,) = due_triggers(counted, OFF, NOW)
    assert trigger.action is LOG_COMPACTION


def test_compaction_when_log_compaction_would_not_do() -> None:
    small_logs = measured(log_bytes=5_000_000)
    compacting = "compacting: 9 log files per slice at p95, target 6; cost unknown"
    cases = [
        table(policy=BOTH_AUTO, measurement=measured(log_bytes=20_000_000)),  # 20% > 10%
        table(policy=BOTH_AUTO, measurement=measured(log_bytes=5_000_000, base_p50=0)),
        table(  # logcompaction not enabled
            policy=BOTH_AUTO,
            enabled_actions=[a for a in ALL if a is not LOG_COMPACTION],
            measurement=small_logs,
        ),
        table(  # logcompaction triggered by a count, not by auto
            policy={"triggers": {"compaction": {"auto": {}}}}, measurement=small_logs
        ),
        table(  # a log compaction ran since the last compaction: it left the log files
            policy=BOTH_AUTO,
            measurement=small_logs,
            delta_commits_since_compaction=5,
            delta_commits_since_log_compaction=2,
        ),
    ]
    for counted in cases:
        assert decide({}, COMPACTION, counted) == compacting
        assert decide({}, LOG_COMPACTION, counted) is None
    never = {"log_compaction_max_ratio": 0}
    counted = table(policy=BOTH_AUTO, measurement=small_logs)
    assert decide(never, COMPACTION, counted) == compacting


def test_clustering_over_the_small_file_share_with_a_write_since_the_last() -> None:
    costs = {"clustering": {"attempts": 3, "executor_seconds": 100.0}}
    counted = table(commits_since_clustering=1, measurement=measured(small=30, services=costs))
    assert decide({}, CLUSTERING, counted) == (
        "clustering: 30 of 100 base files under 104857600 bytes (30%), target at most 20%; "
        "expected cost 33 executor-seconds"
    )
    assert decide({"max_small_file_share": 0.5}, CLUSTERING, counted) is None
    at_target = table(commits_since_clustering=1, measurement=measured(small=20))
    assert decide({}, CLUSTERING, at_target) is None
    no_write = table(commits_since_clustering=0, measurement=measured(small=30))
    assert decide({}, CLUSTERING, no_write) is None
    one_file = table(commits_since_clustering=1, measurement=measured(small=1, bases=2))
    assert decide({}, CLUSTERING, one_file) is None


def test_clean_once_the_last_is_as_old_as_the_time_travel_target() -> None:
    costs = {"clean": {"attempts": 4, "executor_seconds": 20.0}}
    last = {CLEAN: hours_ago(30)}
    counted = table(commits_since_clean=3, last_run_at=last, measurement=measured(services=costs))
    assert decide({"time_travel_hours": 24}, CLEAN, counted) == (
        "cleaning: 30.0 hours since the last clean, 3 new commits, time travel target 24 hours; "
        "expected cost 5 executor-seconds"
    )
    assert decide({"time_travel_hours": 48}, CLEAN, counted) is None
    quiet = table(commits_since_clean=0, last_run_at=last, measurement=measured())
    assert decide({}, CLEAN, quiet) is None
    never = table(commits_since_clean=1, measurement=measured())  # registered 30 days ago
    assert decide({"time_travel_hours": 1.5}, CLEAN, never) == (
        "cleaning: 720.0 hours since the table was registered, 1 new commit, "
        "time travel target 1.5 hours; cost unknown"
    )


def test_the_rules_of_every_policy_still_hold() -> None:
    policy = {"triggers": {"compaction": {"auto": {}}, "clean": {"auto": {}}}}
    due = table(
        policy=policy,
        measurement=measured(),
        commits_since_clean=3,
        last_run_at={CLEAN: hours_ago(30)},
    )
    assert [t.action for t in due_triggers(due, OFF, NOW)] == [COMPACTION, CLEAN]
    assert due_triggers(replace(due, paused=True), OFF, NOW) == []
    pending = replace(due, pending_actions=frozenset({COMPACTION, CLEAN}))
    assert due_triggers(pending, OFF, NOW) == []
    cow = replace(due, table_type=TableType.COPY_ON_WRITE)
    assert [t.action for t in due_triggers(cow, OFF, NOW)] == [CLEAN]
    disabled = replace(due, enabled_actions=[CLEAN])
    assert [t.action for t in due_triggers(disabled, OFF, NOW)] == [CLEAN]


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        (6, ("compaction", "auto"), "expected an object of targets"),
        ({"bogus": 1}, ("compaction", "auto"), "unknown target 'bogus'"),
        (
            {"max_log_files_per_slice": -1},
            ("compaction", "auto", "max_log_files_per_slice"),
            "expected a whole number of log files per slice from 0 to 100000 (0 = off)",
        ),
        (
            {"log_compaction_max_ratio": "low"},
            ("compaction", "auto", "log_compaction_max_ratio"),
            "expected a number of log bytes per base file byte from 0 to 100",
        ),
        (
            {"time_travel_hours": True},
            ("compaction", "auto", "time_travel_hours"),
            "expected a number of hours",
        ),
        (
            {"stale_after_seconds": float("nan")},
            ("compaction", "auto", "stale_after_seconds"),
            "expected a number of seconds",
        ),
    ],
)
def test_bad_targets_are_refused_naming_the_field(
    spec: Any, path: tuple[str, ...], words: str
) -> None:
    with pytest.raises(SpecError) as raised:
        parse_condition({"auto": spec}, COMPACTION, ("compaction",))
    assert raised.value.path == path
    assert words in raised.value.problem


def test_auto_applies_to_the_four_actions_it_decides() -> None:
    for action in (COMPACTION, LOG_COMPACTION, CLUSTERING, CLEAN):
        parse_condition({"auto": {}}, action, (action.value,))
    with pytest.raises(SpecError, match="auto does not apply to archival"):
        parse_condition({"auto": {}}, ServiceAction.ARCHIVAL, ("archival",))
