"""Planning parameters from `extra_params`: short names, Hudi's keys, bad values."""

from __future__ import annotations

import pytest

from tms.hudi.metadata.index_build import BUILDABLE
from tms.planning import (
    INDEX_PARTITIONS,
    BadJobInput,
    index_partitions,
    planning_problems,
    schedule_kwargs,
)


def test_short_names_and_hudi_keys() -> None:
    assert schedule_kwargs("clean", {"hoodie.cleaner.policy": "keep_latest_file_versions"}) == {
        "policy": "KEEP_LATEST_FILE_VERSIONS"
    }
    assert schedule_kwargs("clean", {"retained": "3", "spark.x": 1, "other": 2}) == {"retained": 3}
    assert schedule_kwargs(
        "clustering",
        {
            "hoodie.clustering.plan.strategy.sort.columns": "a, b",
            "target_file_size": 1024,
        },
    ) == {"sort_columns": ["a", "b"], "target_file_size": 1024}
    assert schedule_kwargs("compaction", {"strategy": "log-size"}) == {"strategy": "log-size"}
    assert schedule_kwargs("compaction", {}) == {}


@pytest.mark.parametrize(
    ("action", "params"),
    [
        ("clean", {"retained": 0}),
        ("clean", {"retained": True}),
        ("clustering", {"small_file_limit": "big"}),
        ("clustering", {"sort_columns": [1, 2]}),
        ("compaction", {"strategy": ""}),
    ],
)
def test_bad_values(action: str, params: dict[str, object]) -> None:
    with pytest.raises(BadJobInput):
        schedule_kwargs(action, params)


def test_planning_problems_name_unknown_keys_and_unusable_values() -> None:
    assert planning_problems("clean", {"retained": "3", "spark.executor.cores": "2"}) == {}
    # A key of another action is accepted (Hudi's client sends one set to every action).
    assert planning_problems("clean", {"strategy": "log-size"}) == {}
    problems = planning_problems("clean", {"retaind": "3", "hoodie.cleaner.policy": ""})
    assert sorted(problems) == ["hoodie.cleaner.policy", "retaind"]
    assert problems["retaind"].startswith("retaind is not allowed: neither a Spark setting")
    assert "retained" in problems["retaind"]  # the message lists what is known
    assert problems["hoodie.cleaner.policy"].startswith("hoodie.cleaner.policy: expected")
    assert planning_problems("compaction", {"retained": "0"}) == {}  # not compaction's
    assert planning_problems("clean", {"retained": "0"}) == {
        "retained": "retained: must be positive, got 0"
    }


def test_index_partitions_and_drop() -> None:
    assert schedule_kwargs(
        "indexing", {"partitions": "record_index, Column_Stats,record_index"}
    ) == {"partitions": ("record_index", "column_stats")}
    assert schedule_kwargs("indexing", {"partitions": ["files"], "drop": "1"}) == {
        "partitions": ("files",),
        "drop": True,
    }
    for spelling, value in [("true", True), ("FALSE", False), ("0", False), (True, True)]:
        kwargs = schedule_kwargs("indexing", {"partitions": "files", "drop": spelling})
        assert kwargs["drop"] is value
    assert index_partitions("partition_stats,column_stats") == ("partition_stats", "column_stats")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "partitions is required"),
        ({"drop": "true"}, "partitions is required"),
        ({"partitions": " , "}, "expected one or more of files, column_stats"),
        ({"partitions": "bloom_filters"}, "unknown metadata partition 'bloom_filters'"),
        ({"partitions": [1]}, "expected metadata partition names"),
        ({"partitions": "files", "drop": "yes"}, "expected true or false"),
    ],
)
def test_index_requests_the_job_cannot_plan(params: dict[str, object], message: str) -> None:
    with pytest.raises(BadJobInput, match=message):
        schedule_kwargs("indexing", params)
    problems = planning_problems("indexing", params)
    assert any(message in text for text in problems.values()), problems


def test_only_indexing_requires_partitions() -> None:
    assert planning_problems("indexing", {"partitions": "record_index", "drop": "0"}) == {}
    assert planning_problems("clean", {}) == {}
    assert planning_problems("clean", {"partitions": "nonsense"}) == {}  # not clean's


def test_index_partitions_are_those_an_index_build_makes() -> None:
    assert INDEX_PARTITIONS == BUILDABLE
