"""Sorting a clustering group through local disk gives Arrow's own sort of the rows: nulls
last, NaN after numbers, several key columns, rows added in many parts, a budget far under
the rows' size so there are many runs."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from tms.hudi.files import external_sort
from tms.hudi.files.external_sort import ExternalSort


def _rows(rng: random.Random, start: int, count: int) -> pa.Table:
    def maybe(value: object) -> object:
        return None if rng.random() < 0.05 else value

    return pa.table(
        {
            "city": [
                maybe(rng.choice(["ams", "ber", "chn", "den", "é", "z"])) for _ in range(count)
            ],
            "fare": [
                maybe(float("nan") if rng.random() < 0.03 else round(rng.uniform(0, 50), 1))
                for _ in range(count)
            ],
            "ts": pa.array([maybe(rng.randrange(0, 20)) for _ in range(count)], pa.int64()),
            "key": [f"k{start + i:07d}" for i in range(count)],
            "payload": ["x" * rng.randrange(0, 40) for _ in range(count)],
        }
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "keys", [["city", "fare", "key"], ["ts", "key"], ["key"]], ids=["three", "two", "one"]
)
def test_rows_come_back_in_arrows_order_through_many_runs(
    tmp_path: Path, seed: int, keys: list[str]
) -> None:
    rng = random.Random(seed)
    parts = [_rows(rng, n * 1000, rng.randrange(1, 1000)) for n in range(30)]
    whole = pa.concat_tables(parts)
    sorter = ExternalSort(keys, budget=64 * 1024, workdir=str(tmp_path / "sort"))
    for part in parts:
        sorter.add(part)
    out = list(sorter.sorted_tables())
    assert sorter.runs > 10
    expected = whole.sort_by([(k, "ascending") for k in keys])
    got = pa.concat_tables(out)
    for column in ("key", "city", "ts", "payload"):  # keys are unique: their order is the order
        assert got.column(column).equals(expected.column(column)), column
    assert list((tmp_path / "sort").iterdir()) == []  # runs removed once read
    assert max(t.nbytes for t in out) < whole.nbytes / 4


def test_rows_that_fit_are_sorted_in_memory(tmp_path: Path) -> None:
    rng = random.Random(1)
    rows = _rows(rng, 0, 500)
    sorter = ExternalSort(["city", "key"], budget=1 << 30, workdir=str(tmp_path))
    sorter.add(rows)
    (out,) = sorter.sorted_tables()
    expected = rows.sort_by([("city", "ascending"), ("key", "ascending")])
    assert sorter.runs == 0 and out.column("key").equals(expected.column("key"))


def test_more_runs_than_merged_at_once_are_merged_in_levels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_FAN_IN runs, groups of runs are merged into longer ones first, so the last
    merge holds a batch of at most MAX_FAN_IN runs: the order is the same."""
    monkeypatch.setattr(external_sort, "MAX_FAN_IN", 4)
    rng = random.Random(9)
    parts = [_rows(rng, n * 1000, rng.randrange(200, 600)) for n in range(40)]
    sorter = ExternalSort(["city", "fare", "key"], budget=32 * 1024, workdir=str(tmp_path / "s"))
    for part in parts:
        sorter.add(part)
    got = pa.concat_tables(list(sorter.sorted_tables()))
    expected = pa.concat_tables(parts).sort_by(
        [("city", "ascending"), ("fare", "ascending"), ("key", "ascending")]
    )
    assert sorter.runs > 16, "more than two levels of 4"
    assert sorter.merge_passes >= sorter.runs // 4
    assert got.column("key").equals(expected.column("key"))
    assert list((tmp_path / "s").iterdir()) == []


@pytest.mark.parametrize("seed", range(3))
def test_a_struct_key_merges_in_arrows_order(tmp_path: Path, seed: int) -> None:
    """A clustering sorted by a struct column past the budget: structs compare field by
    field (nulls last, NaN after numbers), a null struct after every other one."""
    rng = random.Random(seed)

    def point() -> object:
        if rng.random() < 0.05:
            return None
        fare = rng.choice([None, float("nan"), round(rng.uniform(0, 5), 1)])
        return {"zone": rng.choice([None, "a", "b"]), "fare": fare}

    kind = pa.struct([("zone", pa.string()), ("fare", pa.float64())])
    parts = [
        pa.table(
            {
                "where": pa.array([point() for _ in range(count)], kind),
                "key": [f"k{n * 1000 + i:07d}" for i in range(count)],
            }
        )
        for n, count in enumerate(rng.randrange(50, 400) for _ in range(20))
    ]
    sorter = ExternalSort(["where", "key"], budget=16 * 1024, workdir=str(tmp_path / "s"))
    for part in parts:
        sorter.add(part)
    got = pa.concat_tables(list(sorter.sorted_tables()))
    expected = pa.concat_tables(parts).sort_by([("where", "ascending"), ("key", "ascending")])
    assert sorter.runs > 10
    assert got.column("key").equals(expected.column("key"))
