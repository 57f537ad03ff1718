"""Planning parameters from `extra_params`: short names, Hudi's keys, bad values."""

from __future__ import annotations

import pytest

from tms.jobs.params import BadJobInput, schedule_kwargs


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
