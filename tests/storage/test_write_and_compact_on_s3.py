"""The project's writer creates and writes a table on S3, and a compaction of it runs on
Spark with every file read and written on S3: hudi-rs reads the same rows before and after."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tests.services.test_compaction import Model, batch, delete, upsert
from tests.storage.conftest import S3Endpoint, spark_environment
from tests.storage.test_tables_on_s3 import oracle_rows
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.table import HudiTable
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter


def expected_rows(model: Model) -> pa.Table:
    rows = sorted(model.values(), key=lambda r: r["id"])
    return pa.Table.from_pylist([{RECORD_KEY: r["id"], **r} for r in rows])


def as_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.select([RECORD_KEY, "id", "ts", "city", "fare"]).to_pylist()


def log_files(base_path: str, options: dict[str, str]) -> list[str]:
    from hudi import HudiTable as OracleTable

    slices = OracleTable(base_path, options).get_file_slices()
    return [name for s in slices for name in s.log_file_names]


def written_table(base: str, table_version: int) -> Model:
    """A MOR table of trips written on S3: an insert, updates and deletes; the rows it holds."""
    table = create_table(
        base,
        "trips",
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=50)
    model: Model = {}
    upsert(writer, model, batch(range(150), ts=1))
    upsert(writer, model, batch(range(0, 150, 2), ts=5))
    delete(writer, model, list(range(0, 150, 7)))
    return model


def test_a_table_written_on_s3_reads_back_in_hudi_rs(s3: S3Endpoint) -> None:
    base = s3.base_path("written")
    model = written_table(base, table_version=6)
    assert as_rows(oracle_rows(base, s3.hudi_rs_options)) == as_rows(expected_rows(model))
    assert log_files(base, s3.hudi_rs_options), "updates of a MOR table go to log files"


@pytest.mark.spark
def test_compaction_of_a_table_on_s3_keeps_its_rows(spark: Any, s3: S3Endpoint) -> None:
    spark_environment(spark, s3)
    base = s3.base_path("compacted")
    model = written_table(base, table_version=8)
    before = oracle_rows(base, s3.hudi_rs_options)
    assert as_rows(before) == as_rows(expected_rows(model))

    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    execute_compaction(spark, HudiTable.open(base), instant)

    assert oracle_rows(base, s3.hudi_rs_options).equals(before)
    assert log_files(base, s3.hudi_rs_options) == []
    completed = HudiTable.open(base).timeline().get(instant)
    assert completed is not None and completed.state.name == "COMPLETED"
