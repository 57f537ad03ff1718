"""Compaction and clustering of tables without meta fields (virtual keys), judged by hudi-rs.

Such a table stores no `_hoodie_record_key`: versions of a record are matched by the key its
key generator computes from the data fields, and the files written keep the meta columns null.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle
from tests.hudi.test_unsupported import listing, set_properties
from tests.services.test_merge_modes import cluster, compact
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.meta_fields import META_FIELDS
from tms.hudi.table import HudiTable
from tms.hudi.write.new_table import create_table
from tms.hudi.write.writer import HudiWriter
from tms.services.compaction import execute_compaction, schedule_compaction

VIRTUAL_KEYS = {"hoodie.populate.meta.fields": "false"}
Model = dict[tuple[int, str], dict[str, Any]]


def rows(ids: list[int], ts: int, note: str) -> pa.Table:
    """Records keyed by (id, name) and partitioned by region, both derived from the id."""
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i % 3}" for i in ids]),
            "region": pa.array(["eu" if i % 2 else "us" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "note": pa.array([note] * len(ids)),
        }
    )


def upsert(writer: HudiWriter, model: Model, batch: pa.Table) -> None:
    """Upsert with event-time ordering: a row replaces the current one unless its ts is lower."""
    writer.upsert(batch)
    for row in batch.to_pylist():
        key = (row["id"], row["name"])
        if key not in model or row["ts"] >= model[key]["ts"]:
            model[key] = row


def oracle_rows(base: str) -> Model:
    """The table as hudi-rs reads it, by (id, name): the only key a virtual-key table has."""
    table = pa.Table.from_batches(oracle.OracleTable(base).read())
    data = table.select([c for c in table.column_names if c not in META_FIELDS])
    return {(r["id"], r["name"]): r for r in data.to_pylist()}


def latest_base_files(base: str) -> list[Path]:
    return [
        Path(base) / s["partition"] / s["base_file"]
        for s in oracle.file_slices(base)
        if s["base_file"]
    ]


def stored_meta_values(base: str) -> set[object]:
    """Every meta-column value in the latest base files."""
    values: set[object] = set()
    for path in latest_base_files(base):
        data = pq.read_table(path)
        for column in META_FIELDS:
            values |= set(data.column(column).to_pylist())
    return values


def assert_footer_key_ranges(base: str) -> None:
    """Each base file's footer holds the range of the keys Hudi's complex key generator gives
    its rows (`id:<id>,name:<name>`), which Hudi's index lookups prune by."""
    for path in latest_base_files(base):
        data = pq.read_table(path)
        keys = [f"id:{r['id']},name:{r['name']}" for r in data.select(["id", "name"]).to_pylist()]
        footer = pq.read_metadata(path).metadata
        assert footer[b"hoodie_min_record_key"].decode() == min(keys), path
        assert footer[b"hoodie_max_record_key"].decode() == max(keys), path


def virtual_key_table(base: str, table_version: int) -> Model:
    """A merge-on-read table with updates (one losing on ts) and a delete in its log files."""
    table = create_table(
        base,
        "vk",
        record_key_fields=["id", "name"],
        ordering_field="ts",
        partition_fields=["region"],
        hive_style_partitioning=True,
        extra_properties=VIRTUAL_KEYS,
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=10)
    model: Model = {}
    upsert(writer, model, rows(list(range(40)), 5, "first"))
    upsert(writer, model, rows(list(range(0, 40, 3)), 7, "newer"))
    upsert(writer, model, rows(list(range(1, 40, 4)), 2, "older, loses"))
    deleted = rows([4, 9, 10], 9, "")
    writer.delete(deleted)
    for row in deleted.to_pylist():
        model.pop((row["id"], row["name"]))
    assert any(s["log_files"] for s in oracle.file_slices(base))
    return model


def test_the_writer_writes_a_virtual_key_table_as_hudi_does(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    model = virtual_key_table(base, 9)
    assert stored_meta_values(base) == {None}
    assert_footer_key_ranges(base)
    assert oracle_rows(base) == model


@pytest.mark.spark
@pytest.mark.parametrize("service", ["compaction", "clustering"])
def test_a_service_merges_records_by_the_computed_key(
    spark: Any, tmp_path: Path, service: str, table_version: int
) -> None:
    base = str(tmp_path / "t")
    model = virtual_key_table(base, table_version)

    (compact if service == "compaction" else cluster)(spark, base)

    assert not any(s["log_files"] for s in oracle.file_slices(base))
    assert stored_meta_values(base) == {None}
    assert_footer_key_ranges(base)
    after = oracle_rows(base)
    assert after == model
    assert {row["note"] for row in after.values()} == {"first", "newer"}


@pytest.mark.spark
def test_a_key_field_of_an_unhandled_type_is_refused_before_anything_is_written(
    spark: Any, tmp_path: Path
) -> None:
    """A double key field's Java string form (`1.0E10`, ...) is not reproduced: refused."""
    base = str(tmp_path / "t")
    table = create_table(base, "vk", record_key_fields=["score"], ordering_field="ts")
    writer = HudiWriter(table, max_file_rows=10)
    scores = pa.array([float(i) for i in range(8)], pa.float64())
    writer.insert(pa.table({"score": scores, "ts": pa.array([1] * 8, pa.int64())}))
    writer.upsert(pa.table({"score": scores[:3], "ts": pa.array([2] * 3, pa.int64())}))
    set_properties(base, **VIRTUAL_KEYS)
    instant = schedule_compaction(HudiTable.open(base))
    assert instant is not None
    before = listing(base)

    with pytest.raises(UnsupportedTableError, match="'score' has type double"):
        execute_compaction(spark, HudiTable.open(base), instant, heartbeat_interval=1)

    assert listing(base) == before
