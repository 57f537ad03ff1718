"""Compaction merges log records as the table's merge mode says, judged by hudi-rs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests import oracle
from tests.services.test_clustering import group_target
from tms.hudi.properties import ORDERING_FIELDS, PRECOMBINE_FIELD, RECORD_MERGE_MODE, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.services.clustering.execute import execute_clustering, schedule_clustering
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
Model = dict[str, dict[str, Any]]

COMMIT_TIME_ORDERING = {
    6: {"hoodie.compaction.payload.class": OVERWRITE_PAYLOAD},
    9: {RECORD_MERGE_MODE: "COMMIT_TIME_ORDERING"},
}
"""Commit-time ordering as each table version says it: the payload class on version 6, the
merge mode on version 9."""
ORDERING_KEY = {6: PRECOMBINE_FIELD, 9: ORDERING_FIELDS}
"""Where each table version keeps its ordering fields."""


def batch(ids: range, ts: int, seq: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([f"k{i:03d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "seq": pa.array([seq] * len(ids), pa.int64()),
            "note": pa.array([f"ts{ts}-seq{seq}" for _ in ids]),
        }
    )


def write(writer: HudiWriter, model: Model, rows: pa.Table, wins: Any) -> None:
    """Upsert `rows`; `wins(new, current)` says whether a new row replaces the current one."""
    writer.upsert(rows)
    for row in rows.to_pylist():
        current = model.get(row["id"])
        if current is None or wins(row, current):
            model[row["id"]] = row


def compact(spark: Any, base: str) -> None:
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    execute_compaction(spark, HudiTable.open(base), instant, heartbeat_interval=1)


def cluster(spark: Any, base: str) -> None:
    table = HudiTable.open(base)
    instant = schedule_clustering(table, target_file_size=group_target(base, slices_per_group=8))
    assert instant is not None
    execute_clustering(spark, HudiTable.open(base), instant, heartbeat_interval=1)


def log_files(base: str) -> list[str]:
    return [log for s in oracle.file_slices(base) for log in s["log_files"]]


def notes(rows: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {key: row["note"] for key, row in rows.items()}


@pytest.mark.spark
@pytest.mark.parametrize("service", ["compaction", "clustering"])
def test_commit_time_ordering_keeps_the_later_write_through_the_service(
    spark: Any, tmp_path: Path, service: str, table_version: int
) -> None:
    """Commit-time ordering (`OverwriteWithLatestAvroPayload` on version 6, the merge mode on
    version 9): the later write wins even with a lower ordering value, and a delete removes
    the record whatever its value."""
    base = str(tmp_path / "t")
    table = create_table(
        base,
        "t",
        record_key_fields=["id"],
        ordering_field="ts",
        table_version=table_version,
        extra_properties=COMMIT_TIME_ORDERING[table_version],
    )
    writer = HudiWriter(table, max_file_rows=20)
    model: Model = {}
    later = lambda new, current: True  # noqa: E731
    write(writer, model, batch(range(60), ts=10, seq=0), later)
    write(writer, model, batch(range(0, 60, 3), ts=5, seq=0), later)  # lower ts: still wins
    write(writer, model, batch(range(0, 60, 4), ts=1, seq=0), later)
    writer.delete(batch(range(50, 55), ts=1, seq=0).select(["id", "ts"]))
    for i in range(50, 55):
        model.pop(f"k{i:03d}")
    assert oracle.rows_by_key(base) == model  # hudi-rs merges by commit time too

    assert log_files(base)

    (compact if service == "compaction" else cluster)(spark, base)

    assert not log_files(base)
    assert oracle.rows_by_key(base) == model
    assert notes(oracle.rows_by_key(base))["k000"] == "ts1-seq0"


@pytest.mark.spark
def test_several_ordering_fields_order_records_as_a_tuple_through_compaction(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    """`ts,seq` as the precombine fields: seq settles ties on ts; a lower ts loses whatever
    its seq. hudi-rs refuses to read tables with several ordering fields, so the compacted
    table (base files only, nothing left to merge) is read from a copy naming `ts` alone."""
    base = str(tmp_path / "t")
    table = create_table(
        base,
        "t",
        record_key_fields=["id"],
        ordering_field="ts",
        table_version=table_version,
        extra_properties={ORDERING_KEY[table_version]: "ts,seq"},
    )
    writer = HudiWriter(table, max_file_rows=100)
    model: Model = {}
    higher = lambda new, current: (new["ts"], new["seq"]) >= (current["ts"], current["seq"])  # noqa: E731
    write(writer, model, batch(range(60), ts=5, seq=5), higher)
    write(writer, model, batch(range(0, 60, 2), ts=5, seq=2), higher)  # tie on ts, lower seq
    write(writer, model, batch(range(0, 60, 3), ts=5, seq=8), higher)  # tie on ts, higher seq
    write(writer, model, batch(range(0, 60, 5), ts=4, seq=99), higher)  # lower ts
    write(writer, model, batch(range(0, 60, 7), ts=6, seq=0), higher)  # higher ts
    assert len(set(notes(model).values())) == 3

    compact(spark, base)

    readable = tmp_path / "readable"
    shutil.copytree(base, readable)
    storage = Storage(str(readable))
    props = dict(TableConfig.load(storage).props)
    TableConfig({**props, ORDERING_KEY[table_version]: "ts"}).save(storage)
    assert not log_files(str(readable))
    assert notes(oracle.rows_by_key(str(readable))) == notes(model)
