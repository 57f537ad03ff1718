"""Specs that cannot run are refused with the path of the value at fault."""

from __future__ import annotations

from typing import Any

import pytest

from tms.policies import AllOf, AnyOf, SpecError, parse_triggers
from tms.policies.spec import MAX_DEPTH, MAX_PARTS
from tms.policies.strategies.commits import Commits
from tms.policies.strategies.delta_commits import DeltaCommits
from tms.policies.strategies.elapsed import Elapsed
from tms.policies.strategies.log_bytes import LogBytes
from tms.policies.strategies.small_files import SmallFiles
from tms.store import ServiceAction


def test_a_full_spec_parses_into_conditions_per_action() -> None:
    parsed = parse_triggers(
        {
            "compaction": {
                "any": [{"delta_commits": 5}, {"elapsed_hours": 24}, {"log_bytes": 1 << 30}]
            },
            "clustering": {"all": [{"small_files": 10}, {"commits": 4}]},
            "clean": {"elapsed_hours": 0.5},
            "metadata-compaction": {"delta_commits": 10},
            "logcompaction": {"any": [{"delta_commits": 8}, {"delta_commits": 0}]},
        }
    )
    c, k = ServiceAction.COMPACTION, ServiceAction.CLUSTERING
    assert parsed == {
        c: AnyOf((DeltaCommits(c, 5), Elapsed(c, 24.0), LogBytes(c, 1 << 30))),
        k: AllOf((SmallFiles(k, 10), Commits(k, 4))),
        ServiceAction.CLEAN: Elapsed(ServiceAction.CLEAN, 0.5),
        ServiceAction.METADATA_COMPACTION: DeltaCommits(ServiceAction.METADATA_COMPACTION, 10),
        ServiceAction.LOG_COMPACTION: AnyOf(
            (
                DeltaCommits(ServiceAction.LOG_COMPACTION, 8),
                DeltaCommits(ServiceAction.LOG_COMPACTION, 0),
            )
        ),
    }
    assert parse_triggers({}) == {}
    assert parse_triggers({"compaction": {"delta_commits": 5.0}}) == {c: DeltaCommits(c, 5)}


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        ([], (), "expected an object of actions"),
        ({"compact": {"delta_commits": 5}}, (), "unknown action 'compact'"),
        ({"indexing": {"commits": 5}}, (), "unknown action 'indexing'"),
        ({"compaction": 5}, ("compaction",), "expected an object with one key"),
        ({"compaction": {}}, ("compaction",), "expected an object with one key"),
        (
            {"compaction": {"delta_commits": 5, "log_files": 3}},
            ("compaction",),
            "expected an object with one key",
        ),
        ({"compaction": {"elapsed_days": 1}}, ("compaction",), "unknown strategy 'elapsed_days'"),
        ({"compaction": {"\udc00": 1}}, ("compaction",), "unknown strategy; expected"),
        (
            {"compaction": {"any": [{"delta_commits": 5}, {"elapsed_hours": -1}]}},
            ("compaction", "any", 1, "elapsed_hours"),
            "expected a number of hours from 0 to 100000",
        ),
        (
            {"compaction": {"delta_commits": 2.5}},
            ("compaction", "delta_commits"),
            "expected a whole number of delta commits",
        ),
        ({"compaction": {"delta_commits": True}}, ("compaction", "delta_commits"), "whole number"),
        ({"compaction": {"delta_commits": "5"}}, ("compaction", "delta_commits"), "whole number"),
        (
            {"compaction": {"delta_commits": 1_000_001}},
            ("compaction", "delta_commits"),
            "from 0 to 1000000 (0 = off)",
        ),
        ({"clean": {"elapsed_hours": float("nan")}}, ("clean", "elapsed_hours"), "a number"),
        ({"clean": {"elapsed_hours": float("inf")}}, ("clean", "elapsed_hours"), "a number"),
        ({"clean": {"any": []}}, ("clean", "any"), f"a list of 1 to {MAX_PARTS}"),
        ({"clean": {"all": {"commits": 5}}}, ("clean", "all"), "a list of"),
        (
            {"clean": {"all": [{"commits": 5}] * (MAX_PARTS + 1)}},
            ("clean", "all"),
            "a list of",
        ),
        (
            {"clustering": {"any": [{"small_files": 3}, {"log_bytes": 10}]}},
            ("clustering", "any", 1, "log_bytes"),
            "log_bytes does not apply to clustering (only compaction)",
        ),
        (
            {"compaction": {"commits": 10}},
            ("compaction", "commits"),
            "commits does not apply to compaction (only clustering, clean, archival)",
        ),
        (
            {"metadata-compaction": {"elapsed_hours": 1}},
            ("metadata-compaction", "elapsed_hours"),
            "does not apply to metadata-compaction",
        ),
        # The store counts log files and bytes since a compaction, not per slice or since a
        # log compaction, and keeps no clock of a log compaction's last run.
        (
            {"logcompaction": {"log_files": 3}},
            ("logcompaction", "log_files"),
            "log_files does not apply to logcompaction (only compaction)",
        ),
        (
            {"logcompaction": {"any": [{"delta_commits": 5}, {"log_bytes": 10}]}},
            ("logcompaction", "any", 1, "log_bytes"),
            "log_bytes does not apply to logcompaction",
        ),
        (
            {"logcompaction": {"elapsed_hours": 1}},
            ("logcompaction", "elapsed_hours"),
            "does not apply to logcompaction (only compaction, clustering, clean)",
        ),
        (
            {"logcompaction": {"commits": 5}},
            ("logcompaction", "commits"),
            "commits does not apply to logcompaction",
        ),
        (
            {"log-compaction": {"delta_commits": 5}},
            (),
            "unknown action 'log-compaction'; expected one of compaction, logcompaction, "
            "clustering, clean, metadata-compaction",
        ),
    ],
)
def test_bad_specs_name_the_path_and_the_problem(
    spec: Any, path: tuple[str | int, ...], words: str
) -> None:
    with pytest.raises(SpecError) as caught:
        parse_triggers(spec)
    assert caught.value.path == path
    assert words in caught.value.problem
    where = ".".join(str(p) for p in path) or "triggers"
    assert str(caught.value).startswith(f"{where}: ")


def test_combinators_nest_only_so_deep() -> None:
    spec: dict[str, Any] = {"delta_commits": 5}
    for _ in range(MAX_DEPTH):
        spec = {"any": [spec]}
    parse_triggers({"compaction": spec})
    with pytest.raises(SpecError) as caught:
        parse_triggers({"compaction": {"all": [spec]}})
    assert caught.value.path == ("compaction", "all", 0, *(["any", 0] * (MAX_DEPTH - 1)), "any")
    assert "nest at most" in caught.value.problem
