"""Compaction and clustering within a tiny memory budget: Apache Hudi writes a merge-on-read
table (its metadata table on) whose file slices take tens of times the budget
(`spark.tms.task.memory`) in memory and whose clustering groups take several times theirs, so
every slice is merged bucket by bucket and every group, split over tasks by key ranges, sorted
in runs through the tasks' local disk; Hudi's reader and hudi-rs read the
same rows after each, and Hudi's writer writes on."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import tms.services.index.build as index
import tms.services.metadata.compaction as metadata_compaction
from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA, hudi_rs_rows
from tests.oracle import file_slices
from tms.hudi.files.names import BaseFileName
from tms.hudi.files.spilled_slice import EXPANSION
from tms.hudi.table import HudiTable
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction
from tms.spark_runtime.task_memory import SETTING

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

BUDGET = 16 * 1024
CLUSTERING_BUDGET = 256 * 1024
KEYS = 20_000
Row = tuple[Any, ...]


@pytest.fixture
def tiny_budget(spark: Any) -> Iterator[None]:
    spark.conf.set(SETTING, str(BUDGET))
    yield
    spark.conf.unset(SETTING)


def _rows(rng: random.Random, keys: range, ts: int) -> list[Row]:
    return [(f"k{i:06d}", ts + rng.randrange(-3, 4), f"p{i % 2}", rng.random()) for i in keys]


def test_slices_and_groups_far_over_the_budget_are_rewritten_as_hudi_reads_them(
    spark: Any,
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    tmp_path: Path,
    tiny_budget: None,
) -> None:
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "budget_v9"
    options = {
        **keyed_table(path.name),
        "hoodie.parquet.small.file.limit": "0",  # each insert: new file groups, to cluster
        **HUDI_1_2.write_options(9),
    }
    rng = random.Random(9)
    write = {**options, "hoodie.datasource.write.operation": "upsert"}
    for start in range(0, KEYS, KEYS // 4):
        hudi.write(path, _rows(rng, range(start, start + KEYS // 4), 10), SCHEMA, write)
    hudi.write(path, _rows(rng, range(0, KEYS, 3), 10), SCHEMA, write)  # ties and losers too
    hudi.write(path, _rows(rng, range(0, KEYS, 5), 20), SCHEMA, write)
    deletes = {**options, "hoodie.datasource.write.operation": "delete"}
    hudi.write(path, _rows(rng, range(0, KEYS, 7), 30), SCHEMA, deletes)
    before = hudi.read(path, COLUMNS)
    assert hudi_rs_rows(str(path)) == before
    slices = [s for s in file_slices(str(path)) if s["log_files"]]
    assert len(slices) == 8
    for found in slices:  # merged in memory, each slice would take 20 budgets and more
        size = (path / found["partition"] / found["base_file"]).stat().st_size
        assert size > 3 * BUDGET and size * EXPANSION > 20 * BUDGET

    compaction = schedule_compaction(HudiTable.open(str(path)))
    assert compaction is not None
    result = execute_compaction(spark, HudiTable.open(str(path)), compaction, heartbeat_interval=1)
    assert result.files_written == len(slices)
    assert not [s for s in file_slices(str(path)) if s["log_files"]]
    assert hudi.read(path, COLUMNS) == before
    assert hudi_rs_rows(str(path)) == before

    spark.conf.set(SETTING, str(CLUSTERING_BUDGET))  # each group: several budgets
    compacted = file_slices(str(path))
    partition_bytes = max(
        sum(
            (path / s["partition"] / s["base_file"]).stat().st_size
            for s in compacted
            if s["partition"] == p
        )
        for p in ("p0", "p1")
    )
    clustering = schedule_clustering(
        HudiTable.open(str(path)),
        small_file_limit=1 << 30,
        target_file_size=partition_bytes * 2 // 5,  # three output file groups a partition
        max_bytes_per_group=1 << 30,
        sort_columns=["val"],
    )
    assert clustering is not None
    result = execute_clustering(spark, HudiTable.open(str(path)), clustering, heartbeat_interval=1)
    assert hudi.read(path, COLUMNS) == before
    assert hudi_rs_rows(str(path)) == before
    latest = file_slices(str(path))
    assert len(latest) == result.files_written >= 6
    for partition in ("p0", "p1"):  # split over tasks by ranges of `val`, sorted across files
        files = [s["base_file"] for s in latest if s["partition"] == partition]
        assert len({BaseFileName.parse(name).write_token for name in files}) >= 3  # type: ignore[union-attr]
        ranges = []
        for name in files:  # each sorted through many runs
            values = (
                pq.read_table(path / partition / name, columns=["val"]).column("val").to_pylist()
            )
            assert values == sorted(values) and len(values) > 20 * BUDGET // 1024
            ranges.append((values[0], values[-1]))
        ranges.sort()
        assert all(low[1] < high[0] for low, high in itertools.pairwise(ranges))
    more = _rows(rng, range(KEYS - 10, KEYS + 10), 40)
    hudi.write(path, more, SCHEMA, write)
    expected = sorted({row[0]: row for row in [*before, *more]}.values())
    assert hudi.read(path, COLUMNS) == expected
    assert hudi_rs_rows(str(path)) == expected


def test_the_record_index_and_the_metadata_tables_compaction_keep_within_a_tiny_budget(
    spark: Any,
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    tmp_path: Path,
    tiny_budget: None,
) -> None:
    """Hudi's writer keeps a record index of 20,000 keys (its index), 1 MB and more: tms's
    clustering (a 256 KiB budget, half of it for the keys) gathers the keys it moves through
    local disk; under a budget of 16 KiB, the metadata table's compaction sorts the record
    index's delete blocks through local disk, and a record index build sorts each file
    group's keys through it; Hudi's classes find every key where the data is, and Hudi's
    writer writes on."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "budget_record_index"
    options = {
        **keyed_table(path.name),
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.index.type": "RECORD_INDEX",
        "hoodie.parquet.small.file.limit": "0",
        **HUDI_1_2.write_options(9),
    }
    rng = random.Random(11)
    model: dict[str, Row] = {}
    deleted: set[str] = set()

    def write(operation: str, rows: list[Row]) -> None:
        hudi.write(path, rows, SCHEMA, {**options, "hoodie.datasource.write.operation": operation})
        for row in rows:
            if operation == "delete":
                model.pop(row[0], None)
                deleted.add(row[0])
            else:
                model[row[0]] = row
                deleted.discard(row[0])

    def judged() -> None:
        report = hudi.run("tests.hudi_java.metadata_check:compare", str(path), [], sorted(deleted))
        assert report["problems"] == []
        assert report["record_keys"] == len(model)
        assert hudi.read(path, COLUMNS) == sorted(model.values())
        assert hudi_rs_rows(str(path)) == sorted(model.values())

    for start in range(0, KEYS, KEYS // 2):
        write("insert", _rows(rng, range(start, start + KEYS // 2), 10))
    write("delete", _rows(rng, range(0, KEYS, 7), 20))
    write("upsert", _rows(rng, range(1, KEYS, 9), 30))

    clustering = schedule_clustering(HudiTable.open(str(path)), small_file_limit=1 << 30)
    assert clustering is not None
    spark.conf.set(SETTING, str(CLUSTERING_BUDGET))  # its rows' sort: thousands of runs at 16 KiB
    done = execute_clustering(spark, HudiTable.open(str(path)), clustering, heartbeat_interval=1)
    assert done.state == "COMPLETED"
    spark.conf.set(SETTING, str(BUDGET))

    compaction = metadata_compaction.schedule(HudiTable.open(str(path)))
    assert compaction is not None
    done = metadata_compaction.execute(spark, HudiTable.open(str(path)), compaction)
    assert done.state == "COMPLETED" and done.records_written >= len(model)
    judged()

    assert index.drop(HudiTable.open(str(path)), ["record_index"]) == {"dropped": "record_index"}
    build = index.schedule(HudiTable.open(str(path)), ["record_index"])
    assert build is not None
    done = index.execute(spark, HudiTable.open(str(path)), build)
    assert done.state == "COMPLETED"
    judged()

    write("upsert", _rows(rng, range(KEYS - 10, KEYS + 10), 40))
    write("delete", _rows(rng, range(2, KEYS, 11), 50))
    judged()
