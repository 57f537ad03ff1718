"""`any` and `all`, alone and nested."""

from __future__ import annotations

from typing import Any

from tests.policies.tables import NOW, hours_ago, table
from tms.policies import parse_condition
from tms.store import CountedTable, ServiceAction

QUIET = table(
    delta_commits_since_compaction=2, last_run_at={ServiceAction.COMPACTION: hours_ago(1)}
)
BUSY = table(
    delta_commits_since_compaction=12, last_run_at={ServiceAction.COMPACTION: hours_ago(1)}
)
OLD = table(delta_commits_since_compaction=2, last_run_at={ServiceAction.COMPACTION: hours_ago(30)})
HEAVY = table(
    delta_commits_since_compaction=2,
    log_bytes_since_compaction=2000,
    last_run_at={ServiceAction.COMPACTION: hours_ago(30)},
)


def reason(spec: dict[str, Any], counted: CountedTable) -> str | None:
    return parse_condition(spec, ServiceAction.COMPACTION, ("compaction",)).evaluate(counted, NOW)


def test_any_is_due_when_one_part_is_and_says_which() -> None:
    spec = {"any": [{"delta_commits": 5}, {"elapsed_hours": 24}]}
    assert reason(spec, QUIET) is None
    assert reason(spec, BUSY) == "12 delta commits since the last compaction (threshold 5)"
    assert reason(spec, OLD) == (
        "30.0 hours since the last compaction (threshold 24), 2 new delta commits"
    )
    both = table(
        delta_commits_since_compaction=12, last_run_at={ServiceAction.COMPACTION: hours_ago(30)}
    )
    assert reason(spec, both) == (
        "12 delta commits since the last compaction (threshold 5); "
        "30.0 hours since the last compaction (threshold 24), 12 new delta commits"
    )


def test_all_is_due_only_when_every_part_is() -> None:
    spec = {"all": [{"elapsed_hours": 24}, {"log_bytes": 1000}]}
    assert reason(spec, OLD) is None  # old enough, too few log bytes
    assert reason(spec, table(log_bytes_since_compaction=5000)) is None  # no time
    assert reason(spec, HEAVY) == (
        "30.0 hours since the last compaction (threshold 24), 2 new delta commits and "
        "2000 log bytes written since the last compaction (threshold 1000)"
    )


def test_a_part_that_is_off_never_makes_any_due_and_always_blocks_all() -> None:
    assert reason({"any": [{"delta_commits": 0}, {"log_files": 0}]}, BUSY) is None
    assert reason({"all": [{"delta_commits": 5}, {"log_files": 0}]}, BUSY) is None


def test_combinators_nest() -> None:
    spec = {
        "any": [
            {"delta_commits": 10},
            {"all": [{"elapsed_hours": 24}, {"any": [{"log_bytes": 1000}, {"log_files": 5}]}]},
        ]
    }
    assert reason(spec, QUIET) is None
    assert reason(spec, OLD) is None  # old, but neither bytes nor files enough
    assert reason(spec, BUSY) is not None
    assert "2000 log bytes" in (reason(spec, HEAVY) or "")
    many_files = table(
        delta_commits_since_compaction=1,
        log_files_since_compaction=5,
        last_run_at={ServiceAction.COMPACTION: hours_ago(25)},
    )
    assert reason(spec, many_files) == (
        "25.0 hours since the last compaction (threshold 24), 1 new delta commit and "
        "5 log files written since the last compaction (threshold 5)"
    )


def test_one_part_is_the_part_itself() -> None:
    for combinator in ("any", "all"):
        assert reason({combinator: [{"delta_commits": 5}]}, BUSY) == reason(
            {"delta_commits": 5}, BUSY
        )
