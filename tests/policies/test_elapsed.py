"""`elapsed_hours`: time since the action last ran (or the registration before a first
run), and only with at least one new commit of the action's kind."""

from __future__ import annotations

import pytest

from tests.policies.tables import NOW, hours_ago, table
from tms.policies import parse_condition
from tms.store import CountedTable, ServiceAction

COUNTER = {
    ServiceAction.COMPACTION: "delta_commits_since_compaction",
    ServiceAction.CLUSTERING: "commits_since_clustering",
    ServiceAction.CLEAN: "commits_since_clean",
}


def reason(hours: float, action: ServiceAction, counted: CountedTable) -> str | None:
    return parse_condition({"elapsed_hours": hours}, action, ()).evaluate(counted, NOW)


@pytest.mark.parametrize("action", list(COUNTER))
def test_due_from_the_hours_since_the_last_run_on(action: ServiceAction) -> None:
    def ran(hours: float) -> CountedTable:
        return table(last_run_at={action: hours_ago(hours)}, **{COUNTER[action]: 1})

    assert reason(24, action, ran(23.9)) is None
    assert reason(24, action, ran(24)) is not None
    assert reason(24, action, ran(30)) is not None


@pytest.mark.parametrize("action", list(COUNTER))
def test_no_new_commit_means_nothing_to_do(action: ServiceAction) -> None:
    quiet = table(last_run_at={action: hours_ago(1000)})
    assert reason(1, action, quiet) is None
    # Other actions' commits do not count: clean's writes are not compaction's deltas.
    others = {field: 5 for a, field in COUNTER.items() if a is not action}
    assert reason(1, action, table(last_run_at={action: hours_ago(1000)}, **others)) is None


def test_the_reason_names_the_hours_the_threshold_and_the_new_commits() -> None:
    ran = table(
        last_run_at={ServiceAction.COMPACTION: hours_ago(25.25)}, delta_commits_since_compaction=3
    )
    assert reason(24, ServiceAction.COMPACTION, ran) == (
        "25.2 hours since the last compaction (threshold 24), 3 new delta commits"
    )
    cleaned = table(last_run_at={ServiceAction.CLEAN: hours_ago(2)}, commits_since_clean=1)
    assert reason(1.5, ServiceAction.CLEAN, cleaned) == (
        "2.0 hours since the last clean (threshold 1.5), 1 new commit"
    )


def test_before_a_first_run_the_clock_starts_at_registration() -> None:
    young = table(created_at=hours_ago(10), delta_commits_since_compaction=2)
    assert reason(12, ServiceAction.COMPACTION, young) is None
    assert reason(10, ServiceAction.COMPACTION, young) == (
        "10.0 hours since the table was registered (threshold 10), 2 new delta commits"
    )
    # Once it ran, the last run is the clock, however old the table.
    ran = table(
        created_at=hours_ago(1000),
        last_run_at={ServiceAction.COMPACTION: hours_ago(1)},
        delta_commits_since_compaction=2,
    )
    assert reason(10, ServiceAction.COMPACTION, ran) is None


def test_no_clock_at_all_is_never_due() -> None:
    unknown = table(created_at=None, delta_commits_since_compaction=9)
    assert reason(1, ServiceAction.COMPACTION, unknown) is None


def test_zero_hours_is_off() -> None:
    ran = table(last_run_at={ServiceAction.CLEAN: hours_ago(10**4)}, commits_since_clean=10)
    assert reason(0, ServiceAction.CLEAN, ran) is None
