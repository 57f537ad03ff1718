"""Key ranges of a split clustering group: each range's rows sorted, ranges in order, must be
the group sorted as Arrow sorts it (nulls last, NaN after every number), a sample cuts the
rows into ranges of even counts, and sampling reads the sort column's chunks alone."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tms.hudi.record_keys.generation import KeyGeneration, KeyGeneratorKind
from tms.hudi.storage import Storage
from tms.services.clustering.ranges import boundaries, range_ids, rangeable, splittable
from tms.services.clustering.rewrite import GroupTask, SliceInput


def _values(rng: random.Random, kind: str, n: int) -> pa.Array:
    def maybe_null(value: object) -> object:
        return None if rng.random() < 0.05 else value

    if kind == "int":
        return pa.array([maybe_null(rng.randrange(-50, 50)) for _ in range(n)], pa.int64())
    if kind == "float":
        pool = [float("nan"), -0.0, 0.0, float("inf"), float("-inf")]
        return pa.array(
            [
                maybe_null(rng.choice(pool) if rng.random() < 0.1 else rng.uniform(-9, 9))
                for _ in range(n)
            ],
            pa.float64(),
        )
    if kind == "string":
        alphabet = "aAzé€𝄞 0"
        return pa.array(
            [maybe_null("".join(rng.choices(alphabet, k=rng.randrange(0, 4)))) for _ in range(n)]
        )
    if kind == "timestamp":
        start = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
        return pa.array(
            [
                maybe_null(start + datetime.timedelta(seconds=rng.randrange(10**6)))
                for _ in range(n)
            ],
            pa.timestamp("us", tz="UTC"),
        )
    assert kind == "decimal"
    return pa.array(
        [maybe_null(decimal.Decimal(rng.randrange(-(10**6), 10**6)) / 100) for _ in range(n)],
        pa.decimal128(10, 2),
    )


KINDS = ["int", "float", "string", "timestamp", "decimal"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(3))
def test_ranges_in_order_are_the_rows_in_arrows_sort_order(kind: str, seed: int) -> None:
    rng = random.Random(seed)
    column = _values(rng, kind, 2_000)
    samples = [(column.slice(start, 300), 700) for start in (0, 700, 1_400)]
    cuts = boundaries(samples, ranges=rng.randrange(2, 7))
    assert cuts is not None
    assert cuts.null_count == 0 and pc.all(pc.less(cuts[:-1], cuts[1:]), min_count=0).as_py()
    ids = range_ids(pa.chunked_array([column.slice(0, 999), column.slice(999)]), cuts)
    assert ids.min() >= 0 and ids.max() <= len(cuts)
    in_sort_order = ids[pc.sort_indices(column).to_numpy()]
    assert (np.diff(in_sort_order) >= 0).all(), (
        "a range holds rows sorting before a range before it"
    )
    nulls = np.asarray(column.is_null().to_numpy(zero_copy_only=False))
    assert (ids[nulls] == len(cuts)).all()


def test_ranges_of_a_sample_are_even() -> None:
    rng = random.Random(7)
    values = pa.array(rng.sample(range(10**6), 40_000), pa.int64())
    # three files of different sizes, each sampled by 1,000 of its values
    files = [values.slice(0, 4_000), values.slice(4_000, 16_000), values.slice(20_000)]
    samples = [(f.take(pa.array(range(0, len(f), len(f) // 1_000))), len(f)) for f in files]
    cuts = boundaries(samples, ranges=4)
    assert cuts is not None and len(cuts) == 3
    counts = Counter(range_ids(values, cuts).tolist())
    assert sorted(counts) == [0, 1, 2, 3]
    assert all(8_000 < n < 12_000 for n in counts.values()), counts


def test_nothing_to_cut_by_gives_no_ranges() -> None:
    only_nulls = pa.array([None, None], pa.float64())
    only_nan = pa.array([float("nan")] * 3)
    assert boundaries([(only_nulls, 10), (only_nan, 10)], ranges=3) is None
    assert boundaries([], ranges=3) is None
    assert boundaries([(pa.array([1, 2, 3]), 3)], ranges=1) is None
    one_value = boundaries([(pa.array([5, 5, 5]), 3)], ranges=3)
    assert one_value is None, "a cut at the smallest value would leave a range empty"


def test_types_without_an_order_are_not_cut() -> None:
    assert rangeable(pa.int32()) and rangeable(pa.string()) and rangeable(pa.date32())
    assert not rangeable(pa.struct([("a", pa.int32())]))
    assert not rangeable(pa.list_(pa.int32()))
    assert not rangeable(pa.map_(pa.string(), pa.int32()))


def _group(**changes: object) -> GroupTask:
    schema = {
        "type": "record",
        "name": "trip",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "fare", "type": "double"},
            {"name": "rider", "type": {"type": "record", "name": "r", "fields": []}},
        ],
    }
    slices = tuple(SliceInput("p1", f"f{n}", f"p1/f{n}.parquet", ()) for n in range(3))
    task = GroupTask(
        base_uri="/t",
        instant_time="1",
        slices=slices,
        sort_columns=(),
        target_file_size=1,
        ordering_fields=(),
        schema_json=json.dumps(schema),
        completed=frozenset(),
        earliest_active="0",
        outputs=2,
    )
    return dataclasses.replace(task, **changes)  # type: ignore[arg-type]


def test_a_group_is_split_by_its_orders_first_column_that_base_files_store() -> None:
    """The first sort column, or the record key with none; never a column without an order,
    a record key a table with virtual keys does not store, or groups of several partitions."""
    assert splittable(_group(sort_columns=("fare",)))
    assert splittable(_group()), "no sort columns: cut by the record key"
    virtual = KeyGeneration(KeyGeneratorKind.SIMPLE, ("id",), ())
    assert splittable(_group(sort_columns=("fare",), keys=virtual))
    assert not splittable(_group(keys=virtual))
    assert not splittable(_group(outputs=1))
    assert not splittable(_group(sort_columns=("rider",)))
    two_partitions = (SliceInput("p1", "a", "p1/a.parquet", ()), SliceInput("p2", "b", None, ()))
    assert not splittable(_group(slices=two_partitions))


def test_a_file_read_by_ranges_fetches_the_columns_asked_for_not_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(11)
    table = pa.table(
        {
            "fare": pa.array([rng.random() for _ in range(100_000)]),
            "note": pa.array([f"{rng.getrandbits(256):064x}" for _ in range(100_000)]),
        }
    )
    pq.write_table(table, tmp_path / "base.parquet", row_group_size=25_000)
    size = (tmp_path / "base.parquet").stat().st_size
    fetched: list[int] = []
    read_range = Storage.read_range

    def counted(storage: Storage, path: str, start: int, end: int) -> bytes:
        fetched.append(end - start)
        return read_range(storage, path, start, end)

    monkeypatch.setattr(Storage, "read_range", counted)
    with pq.ParquetFile(Storage(str(tmp_path)).open_ranged("base.parquet")) as parquet:
        fares = parquet.read(columns=["fare"])
    assert fares.column("fare").equals(table.column("fare"))
    assert sum(fetched) < size / 2, (sum(fetched), size)
