"""`interval_hours` and the partition TTL policy: due once the interval has passed since the
policy last created one (at once before a first), new commits or not; only for a table whose
policy sets `ttl_days` and that enables `partition_ttl`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.policies.tables import NOW, hours_ago, table
from tms.policies import (
    TTL_INTERVAL_HOURS,
    AnyOf,
    SpecError,
    Thresholds,
    due_triggers,
    parse_condition,
    parse_triggers,
    thresholds_for,
)
from tms.policies.params import policy_params
from tms.policies.strategies.interval import Interval
from tms.store import CountedTable, ServiceAction, TableType

TTL = ServiceAction.PARTITION_TTL
DEFAULTS = Thresholds(0, 0, 0)
ON = [TTL]


def reason(hours: float, counted: CountedTable) -> str | None:
    return parse_condition({"interval_hours": hours}, TTL, ()).evaluate(counted, NOW)


def ran(hours: float, **fields: Any) -> CountedTable:
    return table(last_run_at={TTL: hours_ago(hours)}, **fields)


def test_due_once_the_interval_passed_since_the_last_run_without_any_new_commit() -> None:
    assert reason(24, ran(23.9)) is None
    assert reason(24, ran(24)) == "24.0 hours since the last partition TTL (interval 24)"
    assert reason(1.5, ran(30.04)) == "30.0 hours since the last partition TTL (interval 1.5)"
    # other actions' clocks do not count
    other = table(last_run_at={ServiceAction.CLEAN: hours_ago(1000), TTL: hours_ago(1)})
    assert reason(24, other) is None


def test_before_a_first_run_it_is_due_at_once_whenever_the_table_was_registered() -> None:
    assert reason(24, table(created_at=hours_ago(0.1))) == "no partition TTL yet (interval 24)"
    assert reason(24, table(created_at=None)) == "no partition TTL yet (interval 24)"


def test_zero_hours_is_off() -> None:
    assert reason(0, table()) is None
    assert reason(0, ran(10**4)) is None


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ({"partition_ttl": {"interval_hours": -1}}, ("partition_ttl", "interval_hours"), "hours"),
        ({"partition_ttl": {"interval_hours": "24"}}, ("partition_ttl", "interval_hours"), "0 to"),
        (
            {"partition_ttl": {"interval_hours": 100_001}},
            ("partition_ttl", "interval_hours"),
            "from 0 to 100000 (0 = off)",
        ),
        (
            {"partition_ttl": {"elapsed_hours": 24}},
            ("partition_ttl", "elapsed_hours"),
            "elapsed_hours does not apply to partition_ttl",
        ),
        (
            {"partition_ttl": {"commits": 5}},
            ("partition_ttl", "commits"),
            "commits does not apply to partition_ttl",
        ),
        (
            {"clean": {"interval_hours": 24}},
            ("clean", "interval_hours"),
            "interval_hours does not apply to clean (only partition_ttl)",
        ),
    ],
)
def test_bad_specs_are_refused_with_their_path(
    spec: dict[str, Any], path: tuple[str, ...], words: str
) -> None:
    with pytest.raises(SpecError) as refused:
        parse_triggers(spec)
    assert refused.value.path == path
    assert words in refused.value.problem


def test_specs_parse_into_the_interval() -> None:
    assert parse_triggers({"partition_ttl": {"interval_hours": 12}}) == {TTL: Interval(TTL, 12.0)}
    assert parse_triggers({"partition_ttl": {"any": [{"interval_hours": 6.5}]}}) == {
        TTL: AnyOf((Interval(TTL, 6.5),))
    }


def decide(policy: dict[str, Any], **fields: Any) -> list[tuple[ServiceAction, str]]:
    values: dict[str, Any] = {"enabled_actions": ON, "policy": policy, **fields}
    return [(t.action, t.reason) for t in due_triggers(table(**values), DEFAULTS, NOW)]


def test_the_policy_creates_one_only_for_a_table_that_sets_its_days_and_enables_it() -> None:
    first = [(TTL, "policy: no partition TTL yet (interval 24)")]
    assert decide({"ttl_days": 90}) == first
    assert decide({}) == []  # no TTL: never, whatever else the table enables
    assert decide({"ttl_partitions": ["dt=2025-*"], "ttl_interval_hours": 1}) == []
    assert decide({"triggers": {"partition_ttl": {"interval_hours": 1}}}) == []
    assert decide({"ttl_days": 90}, enabled_actions=[ServiceAction.COMPACTION]) == []
    assert decide({"ttl_days": 90}, pending_actions=frozenset(ON)) == []
    assert decide({"ttl_days": 90}, paused=True) == []
    assert decide({"ttl_days": 90}, table_type=TableType.COPY_ON_WRITE) == first


def test_the_interval_is_a_day_unless_the_policy_sets_one() -> None:
    assert TTL_INTERVAL_HOURS == 24.0 == thresholds_for({}, DEFAULTS).ttl_interval_hours
    assert decide({"ttl_days": 90}, last_run_at={TTL: hours_ago(23)}) == []
    assert decide({"ttl_days": 9}, last_run_at={TTL: hours_ago(24)}) == [
        (TTL, "policy: 24.0 hours since the last partition TTL (interval 24)")
    ]
    six = {"ttl_days": 90, "ttl_interval_hours": 6}
    assert thresholds_for(six, DEFAULTS).ttl_interval_hours == 6.0
    assert decide(six, last_run_at={TTL: hours_ago(7)}) == [
        (TTL, "policy: 7.0 hours since the last partition TTL (interval 6)")
    ]
    assert decide({**six, "ttl_interval_hours": 0}, last_run_at={TTL: hours_ago(10**4)}) == []
    triggered = {"ttl_days": 90, "triggers": {"partition_ttl": {"interval_hours": 2}}}
    assert decide(triggered, last_run_at={TTL: hours_ago(3)}) == [
        (TTL, "policy: 3.0 hours since the last partition TTL (interval 2)")
    ]


def test_a_policy_made_partition_ttl_carries_the_tables_ttl_settings() -> None:
    policy = {
        "ttl_days": 90,
        "ttl_partitions": ["dt=2025-*", "region=eu/*"],
        "ttl_max_partitions": 10,
        "ttl_interval_hours": 12,
        "archival_keep_min": 4,
    }
    assert policy_params(policy, TTL) == {
        "ttl_days": 90,
        "ttl_partitions": ["dt=2025-*", "region=eu/*"],
        "ttl_max_partitions": 10,
    }
    assert policy_params({"ttl_days": 7}, TTL) == {"ttl_days": 7}
