"""Each count strategy at its edges: just below, at and above its threshold, 0 = off, and
no data (a counter never bumped) = not due."""

from __future__ import annotations

from typing import Any

import pytest

from tests.policies.tables import NOW, table
from tms.policies import STRATEGIES, Strategy, parse_condition
from tms.store import CountedTable, ServiceAction


def reason(spec: dict[str, Any], action: ServiceAction, counted: CountedTable) -> str | None:
    return parse_condition(spec, action, (action.value,)).evaluate(counted, NOW)


# (strategy, action, the CountedTable field it reads, the reason's words)
COUNTS = [
    (
        "delta_commits",
        ServiceAction.COMPACTION,
        "delta_commits_since_compaction",
        "delta commits since the last compaction",
    ),
    (
        "delta_commits",
        ServiceAction.LOG_COMPACTION,
        "delta_commits_since_log_compaction",
        "delta commits since the last log compaction or compaction",
    ),
    (
        "delta_commits",
        ServiceAction.METADATA_COMPACTION,
        "commits_since_metadata_compaction",
        "metadata table delta commits since the last metadata compaction",
    ),
    ("commits", ServiceAction.CLEAN, "commits_since_clean", "commits since the last clean"),
    (
        "commits",
        ServiceAction.CLUSTERING,
        "commits_since_clustering",
        "commits since the last clustering",
    ),
    (
        "log_bytes",
        ServiceAction.COMPACTION,
        "log_bytes_since_compaction",
        "log bytes written since the last compaction",
    ),
    (
        "log_files",
        ServiceAction.COMPACTION,
        "log_files_since_compaction",
        "log files written since the last compaction",
    ),
]


@pytest.mark.parametrize(("name", "action", "field", "words"), COUNTS)
def test_a_count_is_due_from_its_threshold_on(
    name: str, action: ServiceAction, field: str, words: str
) -> None:
    spec = {name: 5}
    assert reason(spec, action, table(**{field: 4})) is None
    assert reason(spec, action, table(**{field: 5})) == f"5 {words} (threshold 5)"
    assert reason(spec, action, table(**{field: 6})) == f"6 {words} (threshold 5)"


@pytest.mark.parametrize(("name", "action", "field", "words"), COUNTS)
def test_a_zero_threshold_is_off_and_no_data_is_not_due(
    name: str, action: ServiceAction, field: str, words: str
) -> None:
    assert reason({name: 0}, action, table(**{field: 10**9})) is None
    assert reason({name: 1}, action, table()) is None  # nothing counted since the last run


def test_the_count_strategies_read_only_their_actions_counter() -> None:
    busy = table(commits_since_clean=50, delta_commits_since_compaction=0)
    assert reason({"commits": 10}, ServiceAction.CLEAN, busy) is not None
    assert reason({"commits": 10}, ServiceAction.CLUSTERING, busy) is None
    assert reason({"delta_commits": 10}, ServiceAction.COMPACTION, busy) is None
    # Compaction and log compaction count the same delta commits from different restarts.
    logs = table(delta_commits_since_compaction=3, delta_commits_since_log_compaction=12)
    assert reason({"delta_commits": 10}, ServiceAction.LOG_COMPACTION, logs) is not None
    assert reason({"delta_commits": 10}, ServiceAction.COMPACTION, logs) is None
    deltas = table(delta_commits_since_compaction=12, delta_commits_since_log_compaction=3)
    assert reason({"delta_commits": 10}, ServiceAction.LOG_COMPACTION, deltas) is None
    assert reason({"delta_commits": 10}, ServiceAction.COMPACTION, deltas) is not None


def test_log_bytes_take_sizes_beyond_32_bits() -> None:
    gib = 1 << 30
    spec = {"log_bytes": 5 * gib}
    assert (
        reason(spec, ServiceAction.COMPACTION, table(log_bytes_since_compaction=5 * gib - 1))
        is None
    )
    assert reason(spec, ServiceAction.COMPACTION, table(log_bytes_since_compaction=5 * gib)) == (
        f"{5 * gib} log bytes written since the last compaction (threshold {5 * gib})"
    )


def test_small_files_count_the_fullest_single_partition() -> None:
    spec = {"small_files": 10}
    spread = table(small_files_since_clustering={"a": 9, "b": 9, "c": 9})  # 27 in all
    assert reason(spec, ServiceAction.CLUSTERING, spread) is None
    at = table(small_files_since_clustering={"a": 9, "2026/01/02": 10})
    assert reason(spec, ServiceAction.CLUSTERING, at) == (
        '10 small base files in partition "2026/01/02" since the last clustering (threshold 10)'
    )
    tie = table(small_files_since_clustering={"z": 12, "b": 12, "a": 3})
    assert 'partition "b"' in (reason(spec, ServiceAction.CLUSTERING, tie) or "")
    flat = table(small_files_since_clustering={"": 11})
    assert reason(spec, ServiceAction.CLUSTERING, flat) == (
        "11 small base files in the table (not partitioned) since the last clustering "
        "(threshold 10)"
    )


def test_small_files_edges() -> None:
    spec = {"small_files": 3}
    assert reason(spec, ServiceAction.CLUSTERING, table()) is None  # no partition counted
    assert (
        reason(spec, ServiceAction.CLUSTERING, table(small_files_since_clustering={"p": 2})) is None
    )
    assert reason(spec, ServiceAction.CLUSTERING, table(small_files_since_clustering={"p": 3}))
    assert (
        reason(
            {"small_files": 0},
            ServiceAction.CLUSTERING,
            table(small_files_since_clustering={"p": 100}),
        )
        is None
    )


def test_every_registered_strategy_parses_a_number_and_says_which_actions() -> None:
    for name, strategy in STRATEGIES.items():
        assert issubclass(strategy, Strategy), name
        assert strategy.actions, name
        for action in strategy.actions:
            # `auto` takes an object of targets (tests/policies/test_auto.py), the rest a number.
            parsed = parse_condition({name: {} if name == "auto" else 1}, action, ())
            assert isinstance(parsed, strategy)
