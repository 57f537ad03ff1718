"""Savepoints tms makes are Hudi's: Hudi's procedures list and remove them, Hudi's cleaner keeps
their files, and after tms's clustering and clean ran past them Hudi's reader and hudi-rs
still read the table as of the savepoint (time travel); a savepoint Hudi made is listed by
tms and kept by tms's cleaner. Versions 6 and 9, copy-on-write with a metadata table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hudi import HudiReadOptions
from hudi import HudiTable as OracleTable
from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA, hudi_rs_rows
from tests.hudi_java.writer_options import SERVICES_OFF_THE_WRITER
from tms.hudi.savepoints import create_savepoint, delete_savepoint, list_savepoints
from tms.hudi.table import HudiTable
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS
from tms.services.apache_hudi.procedures import call, catalog_table
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_FILE_VERSIONS, schedule_clean
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]


def procedure(spark: Any, base_path: str, name: str, arguments: dict[str, Any]) -> list[Any]:
    """Hudi's procedure `name` on the table (registered by its location); its rows."""
    with catalog_table(spark, base_path) as table:
        rows = call(spark, name, table=table, **arguments)
    return [sorted((k, str(v)) for k, v in row.items()) for row in rows]


def hudi_savepoints(spark: Any, base_path: str) -> list[str]:
    """The savepoints Hudi's `show_savepoints` lists."""
    with catalog_table(spark, base_path) as table:
        rows = call(spark, "show_savepoints", table=table)
    return sorted(str(row["savepoint_time"]) for row in rows)


def rs_rows_as_of(base_path: str, instant: str) -> list[Row]:
    """hudi-rs's rows of the table as of `instant` (time travel)."""
    options = HudiReadOptions().with_as_of_timestamp(instant)
    batches = OracleTable(base_path).read(options)
    rows = pa.Table.from_batches(batches).select(COLUMNS).to_pylist()
    return sorted(tuple(row.values()) for row in rows)


def hudi_clean(spark: Any, base_path: str) -> None:
    """Hudi's own clean, keeping one version of each file group."""
    with catalog_table(spark, base_path) as table:
        call(
            spark, "run_clean", table=table, clean_policy="KEEP_LATEST_FILE_VERSIONS",
            file_versions_retained=1,
        )  # fmt: skip


@pytest.mark.parametrize(
    "table_version", [pytest.param(6, marks=pytest.mark.extended), 9], ids=["v6", "v9"]
)
def test_savepoints_hold_through_tms_and_hudis_services(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path, table_version: int
) -> None:
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / f"trips_v{table_version}"
    base = str(path)
    options = {
        **keyed_table(path.name, "COPY_ON_WRITE"),
        **HUDI_1_2.write_options(table_version),
        **SERVICES_OFF_THE_WRITER,
        "hoodie.metadata.enable": "true",
        "hoodie.parquet.small.file.limit": "0",  # each insert a file group of its own
    }

    def write(operation: str, rows: list[Row]) -> None:
        hudi.write(path, rows, SCHEMA, {**options, "hoodie.datasource.write.operation": operation})

    write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(6)])
    write("upsert", [("k0", 20, "p0", 0.5), ("k1", 20, "p1", 1.5)])
    table = HudiTable.open(base)
    saved = table.timeline().completed(WRITE_COMMIT_ACTIONS)[-1].requested_time
    then = hudi.read(path, COLUMNS)
    savepoint, made = create_savepoint(table, saved, user="ops", comment="before the backfill")
    assert made and savepoint.files > 0
    assert hudi.run("tests.hudi_java.test_savepoints_hudi:hudi_savepoints", base) == [saved]

    for n in range(2):
        write("upsert", [(f"k{i}", 30 + n, f"p{i % 2}", i + n / 10) for i in range(6)])
    write("insert", [("k6", 40, "p0", 6.0), ("k7", 40, "p1", 7.0)])
    # tms's clustering and a clean keeping one version: the savepoint's files stay
    clustering = schedule_clustering(HudiTable.open(base), small_file_limit=1 << 30)
    assert clustering is not None
    execute_clustering(spark, HudiTable.open(base), clustering)
    clean = schedule_clean(HudiTable.open(base), policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    assert execute_clean(spark, HudiTable.open(base), clean).files_deleted > 0
    hudi.run("tests.hudi_java.test_savepoints_hudi:hudi_clean", base)  # and Hudi's own clean
    now = hudi.read(path, COLUMNS)
    assert now != then
    assert hudi.read(path, COLUMNS, {"as.of.instant": saved}) == then
    assert rs_rows_as_of(base, saved) == then
    assert hudi_rs_rows(base) == now
    report = hudi.run("tests.hudi_java.metadata_check:compare", base)
    assert report["problems"] == [], report

    # a savepoint Hudi made is listed by tms and kept by tms's cleaner
    write("upsert", [("k2", 50, "p0", 2.5)])
    hudi_made = HudiTable.open(base).timeline().completed(WRITE_COMMIT_ACTIONS)[-1].requested_time
    hudi.run(
        "tests.hudi_java.test_savepoints_hudi:procedure",
        base,
        "create_savepoint",
        {"commit_time": hudi_made, "user": "hudi", "comments": "by Hudi"},
    )
    listed = list_savepoints(HudiTable.open(base))
    assert [(s.instant_time, s.savepointed_by) for s in listed] == [
        (saved, "ops"),
        (hudi_made, "hudi"),
    ]
    at_hudis = hudi.read(path, COLUMNS, {"as.of.instant": hudi_made})
    write("upsert", [("k2", 60, "p0", 2.75), ("k3", 60, "p1", 3.75)])
    clean = schedule_clean(HudiTable.open(base), policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    execute_clean(spark, HudiTable.open(base), clean)
    assert hudi.read(path, COLUMNS, {"as.of.instant": hudi_made}) == at_hudis
    assert hudi.read(path, COLUMNS, {"as.of.instant": saved}) == then

    # removed by tms: Hudi lists it no more, and the next clean may take its files
    assert delete_savepoint(HudiTable.open(base), saved) is True
    assert hudi.run("tests.hudi_java.test_savepoints_hudi:hudi_savepoints", base) == [hudi_made]
    clean = schedule_clean(HudiTable.open(base), policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    execute_clean(spark, HudiTable.open(base), clean)
    write("upsert", [("k4", 70, "p0", 4.25)])
    assert hudi.read(path, COLUMNS) == hudi_rs_rows(base)
    assert HudiTable.open(base).config.table_version == table_version
