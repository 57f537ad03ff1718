"""Index builds by Hudi's own async indexer (`tms.services.apache_hudi.indexer`) inside tms's job
protocol, on tables Hudi 1.2's writer made: plans cross over both ways (Hudi's plan built by
tms's code, tms's plan built by Hudi's), a record index built by Hudi's code on a version 6
merge-on-read table. After each: Hudi's reader and hudi-rs read the same rows, the metadata
table agrees with a listing and with the files' own values (`metadata_check`), and Hudi's
writer writes on with the new partition kept right."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hudi_java.support import HUDI_1_2, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA, hudi_rs_rows
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.apache_hudi.indexer import HudiIndexPlanner
from tms.services.index import build as native_index

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

STATS_COLUMNS = ["key", "ts", "val"]
SWITCHES = {
    "column_stats": "hoodie.metadata.index.column.stats.enable",
    "record_index": "hoodie.metadata.record.index.enable",
}


def hudi_plans(spark: Any, base_path: str, partitions: list[str]) -> str | None:
    """Hudi's plan of a build of `partitions` (in the child, whose Spark carries Hudi)."""
    return HudiIndexPlanner().schedule(spark, HudiTable.open(base_path), {"partitions": partitions})


def attempt(hudi: HudiSpark, path: Path, **fields: Any) -> dict[str, Any]:
    """One `indexing` attempt in tms's job protocol; the figures of its SUCCEEDED result."""
    outcome = hudi.run("tests.hudi_java.hudi_jobs:run_attempt", str(path), "indexing", fields)
    result = outcome["result"]
    assert outcome["code"] == 0 and result is not None, outcome
    assert result["outcome"] == "SUCCEEDED", result
    figures: dict[str, Any] = result["figures"]
    return figures


def table_of(hudi: HudiSpark, path: Path, version: int, table_type: str) -> dict[str, str]:
    """A table of two commits by Hudi's writer with only its `files` partition; the
    writer's options."""
    options = {
        **keyed_table(path.name, table_type),
        **HUDI_1_2.write_options(version),
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.index.column.stats.enable": "false",
        "hoodie.metadata.index.partition.stats.enable": "false",
    }
    inserts = [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)]
    hudi.write(path, inserts, SCHEMA, {**options, "hoodie.datasource.write.operation": "insert"})
    updates = [(f"k{i}", 20, f"p{i % 2}", i + 0.5) for i in range(3)]
    hudi.write(path, updates, SCHEMA, {**options, "hoodie.datasource.write.operation": "upsert"})
    assert HudiTable.open(str(path)).config.metadata_partitions == ["files"]
    return options


def check(hudi: HudiSpark, path: Path, rows: list[tuple[Any, ...]], partition: str) -> None:
    assert hudi.read(path, COLUMNS) == rows
    assert hudi_rs_rows(str(path)) == rows
    report = hudi.run("tests.hudi_java.metadata_check:compare", str(path), STATS_COLUMNS)
    assert report["problems"] == [], report
    counted = {"column_stats": "column_stats", "record_index": "record_keys"}[partition]
    assert report[counted] > 0, report


def writes_on(hudi: HudiSpark, path: Path, options: dict[str, str], partition: str) -> None:
    """Hudi's writer upserts with the new partition on; the table reads right after."""
    updates = [(f"k{i}", 30, f"p{i % 2}", i + 0.25) for i in range(2)]
    configs = {
        **options,
        SWITCHES[partition]: "true",
        "hoodie.datasource.write.operation": "upsert",
    }
    hudi.write(path, updates, SCHEMA, configs)
    check(hudi, path, hudi.read(path, COLUMNS), partition)
    assert HudiTable.open(str(path)).config.table_version == int(
        options.get("hoodie.write.table.version", "9")
    )


@pytest.mark.parametrize(
    ("planner", "partition"), [("hudi", "column_stats"), ("native", "record_index")]
)
def test_index_plans_cross_over(
    hudi_spark: Callable[..., HudiSpark], tmp_path: Path, planner: str, partition: str
) -> None:
    """A plan one executor wrote is built by the other, on a version 9 copy-on-write table."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / f"{partition}_{planner}"
    options = table_of(hudi, path, 9, "COPY_ON_WRITE")
    rows = hudi.read(path, COLUMNS)
    if planner == "hudi":
        instant = hudi.run(
            "tests.hudi_java.test_hudi_index_builds:hudi_plans", str(path), [partition]
        )
    else:
        instant = native_index.schedule(HudiTable.open(str(path)), [partition])
    assert instant is not None
    builder = "native" if planner == "hudi" else "hudi"
    figures = attempt(hudi, path, instant=instant, executor=builder)
    assert figures["executor"] == builder and figures["file_groups"] > 0, figures
    table = HudiTable.open(str(path))
    assert partition in table.config.metadata_partitions
    assert table.timeline().get(instant).is_completed
    assert not table.timeline().pending((Action.INDEXING,))
    check(hudi, path, rows, partition)
    writes_on(hudi, path, options, partition)


def test_hudi_builds_a_record_index_of_a_version_6_merge_on_read_table(
    hudi_spark: Callable[..., HudiSpark], tmp_path: Path
) -> None:
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "record_index_v6"
    options = table_of(hudi, path, 6, "MERGE_ON_READ")
    rows = hudi.read(path, COLUMNS)
    figures = attempt(hudi, path, executor="hudi", extra_params={"partitions": "record_index"})
    assert figures["executor"] == "hudi" and figures["file_groups"] > 0, figures
    assert "record_index" in HudiTable.open(str(path)).config.metadata_partitions
    check(hudi, path, rows, "record_index")
    writes_on(hudi, path, options, "record_index")


def test_hudis_code_is_not_given_stats_of_a_merge_on_read_table(
    hudi_spark: Callable[..., HudiSpark], tmp_path: Path
) -> None:
    """Refused before anything is written: no plan, no partition, the rows as they were."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "stats_mor_v9"
    table_of(hudi, path, 9, "MERGE_ON_READ")
    before = HudiTable.open(str(path)).timeline().instants
    outcome = hudi.run(
        "tests.hudi_java.hudi_jobs:run_attempt",
        str(path),
        "indexing",
        {"executor": "hudi", "extra_params": {"partitions": "column_stats"}},
    )
    result = outcome["result"]
    assert result["outcome"] == "FAILED" and not result.get("retryable"), result
    assert "merge-on-read" in result["error"], result
    table = HudiTable.open(str(path))
    assert table.timeline().instants == before
    assert table.config.metadata_partitions == ["files"]
