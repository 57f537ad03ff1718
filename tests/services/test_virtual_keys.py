"""Compaction and clustering of tables without meta fields (virtual keys), judged by hudi-rs.

Such a table stores no `_hoodie_record_key`: versions of a record are matched by the key its
key generator computes from the data fields, and the files written keep the meta columns null.
Tables of the complex, timestamp-based and custom key generators are covered; the last two are
laid out by partition paths printed from an epoch-millis field, as Hudi prints them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
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
from tms.hudi.properties import PARTITION_FIELDS, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.testing.sample_writer import keys
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

VIRTUAL_KEYS = {"hoodie.populate.meta.fields": "false"}
Model = dict[tuple[int, str], dict[str, Any]]
KeyOf = Callable[[dict[str, Any]], str]

FIRST_EVENT_MS = 1_700_000_000_000
"""2023-11-14T22:13:20Z, which is 2023-11-15 in Shanghai."""
DAY_MS = 86_400_000
OUTPUT_FORMAT = "hoodie.keygen.timebased.output.dateformat"
TIMESTAMP_SETTINGS = {
    "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
    OUTPUT_FORMAT: "yyyy-MM-dd",
    "hoodie.keygen.timebased.output.timezone": "Asia/Shanghai",
}
KEY_GENERATORS: dict[str, tuple[str, list[str], list[str]]] = {
    "timestamp": (keys.TIMESTAMP_KEY_GENERATOR, ["id"], ["event_ms"]),
    "custom": (keys.CUSTOM_KEY_GENERATOR, ["id", "name"], ["region:SIMPLE", "event_ms:TIMESTAMP"]),
}
"""Key generator class, record key fields and partition fields of each table."""
EXPECTED_PARTITIONS = {
    # TimestampBasedAvroKeyGenerator: epoch millis printed yyyy-MM-dd in Asia/Shanghai, hive style
    "timestamp": {f"event_ms=2023-11-{day}" for day in (15, 16, 17, 18)},
    # CustomAvroKeyGenerator: the simple part, then the timestamp part, joined by /
    "custom": {
        "region=us/event_ms=2023-11-15",
        "region=eu/event_ms=2023-11-16",
        "region=us/event_ms=2023-11-17",
        "region=eu/event_ms=2023-11-18",
    },
}


def rows(ids: list[int], ts: int, note: str) -> pa.Table:
    """Records keyed by (id, name) and partitioned by region or by the day of their event, all
    derived from the id."""
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i % 3}" for i in ids]),
            "region": pa.array(["eu" if i % 2 else "us" for i in ids]),
            "event_ms": pa.array([FIRST_EVENT_MS + (i % 4) * DAY_MS for i in ids], pa.int64()),
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
    table = pa.Table.from_batches(oracle.OracleTable(oracle_view(base)).read())
    data = table.select([c for c in table.column_names if c not in META_FIELDS])
    return {(r["id"], r["name"]): r for r in data.to_pylist()}


def oracle_view(base: str) -> str:
    """The table, or a copy hudi-rs 0.5 can open: it takes `hoodie.table.partition.fields` for
    column names, so a copy names the custom key generator's fields without their `:TYPE`."""
    fields = TableConfig.load(Storage(base)).get(PARTITION_FIELDS)
    if ":" not in fields:
        return base
    view = base + "-oracle-view"
    shutil.rmtree(view, ignore_errors=True)
    shutil.copytree(base, view)
    names = ",".join(field.split(":")[0] for field in fields.split(","))
    rewrite_properties(view, changes={PARTITION_FIELDS: names})
    return view


def rewrite_properties(base: str, changes: dict[str, str], drop: tuple[str, ...] = ()) -> None:
    storage = Storage(base)
    props = {k: v for k, v in TableConfig.load(storage).props.items() if k not in drop}
    TableConfig({**props, **changes}).save(storage)


def latest_slices(base: str) -> list[dict[str, Any]]:
    return oracle.file_slices(oracle_view(base))


def latest_base_files(base: str) -> list[Path]:
    return [
        Path(base) / s["partition"] / s["base_file"] for s in latest_slices(base) if s["base_file"]
    ]


def stored_meta_values(base: str) -> set[object]:
    """Every meta-column value in the latest base files."""
    values: set[object] = set()
    for path in latest_base_files(base):
        data = pq.read_table(path)
        for column in META_FIELDS:
            values |= set(data.column(column).to_pylist())
    return values


def complex_key(row: dict[str, Any]) -> str:
    """The key Hudi's complex key generator (and the custom one, with two record key fields)
    gives a row."""
    return f"id:{row['id']},name:{row['name']}"


def simple_key(row: dict[str, Any]) -> str:
    """The key of a single record key field: the value (`KeyGenUtils.getRecordKey`)."""
    return str(row["id"])


def assert_footer_key_ranges(base: str, key_of: KeyOf = complex_key) -> None:
    """Each base file's footer holds the range of the keys the table's key generator gives its
    rows, which Hudi's index lookups prune by."""
    for path in latest_base_files(base):
        data = pq.read_table(path)
        row_keys = [key_of(r) for r in data.select(["id", "name"]).to_pylist()]
        footer = pq.read_metadata(path).metadata
        assert footer[b"hoodie_min_record_key"].decode() == min(row_keys), path
        assert footer[b"hoodie_max_record_key"].decode() == max(row_keys), path


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
    return write_history(base, HudiWriter(table, max_file_rows=10))


def keyed_table(base: str, table_version: int, generator: str) -> Model:
    """`virtual_key_table` written with the timestamp-based or the custom key generator, its
    `hoodie.properties` then left as Hudi leaves it: the custom key generator's timestamp
    settings are not persisted (`HoodieSparkSqlWriter` persists them for the timestamp-based
    key generator only), and table version 6 keeps partition field names without their types
    (`SparkKeyGenUtils.getPartitionColumnsForKeyGenerator`)."""
    table = new_keyed_table(base, table_version, generator, TIMESTAMP_SETTINGS)
    partition_fields = KEY_GENERATORS[generator][2]
    # four partitions of ten records: two file groups each, which clustering can join
    model = write_history(base, HudiWriter(table, max_file_rows=5))
    if generator == "custom":
        names = ",".join(field.split(":")[0] for field in partition_fields)
        changes = {PARTITION_FIELDS: names} if table_version == 6 else {}
        rewrite_properties(base, changes, drop=tuple(TIMESTAMP_SETTINGS))
    return model


def new_keyed_table(
    base: str, table_version: int, generator: str, settings: dict[str, str]
) -> HudiTable:
    """An empty virtual-key table of the timestamp-based or custom key generator."""
    key_generator, record_key_fields, partition_fields = KEY_GENERATORS[generator]
    return create_table(
        base,
        "vk",
        record_key_fields=record_key_fields,
        ordering_field="ts",
        partition_fields=partition_fields,
        hive_style_partitioning=True,
        extra_properties={**VIRTUAL_KEYS, **settings},
        table_version=table_version,
        key_generator=key_generator,
    )


def write_history(base: str, writer: HudiWriter) -> Model:
    model: Model = {}
    upsert(writer, model, rows(list(range(40)), 5, "first"))
    upsert(writer, model, rows(list(range(0, 40, 3)), 7, "newer"))
    upsert(writer, model, rows(list(range(1, 40, 4)), 2, "older, loses"))
    deleted = rows([4, 9, 10], 9, "")
    writer.delete(deleted)
    for row in deleted.to_pylist():
        model.pop((row["id"], row["name"]))
    assert any(s["log_files"] for s in latest_slices(base))
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


@pytest.mark.parametrize("generator", sorted(KEY_GENERATORS))
def test_the_writer_lays_out_timestamp_and_custom_key_generator_tables_as_hudi_does(
    tmp_path: Path, generator: str, table_version: int
) -> None:
    base = str(tmp_path / "t")
    model = keyed_table(base, table_version, generator)
    assert {s["partition"] for s in latest_slices(base)} == EXPECTED_PARTITIONS[generator]
    assert stored_meta_values(base) == {None}
    assert_footer_key_ranges(base, simple_key if generator == "timestamp" else complex_key)
    assert oracle_rows(base) == model


def test_the_writer_refuses_partition_paths_it_cannot_print_before_writing(
    tmp_path: Path,
) -> None:
    """Joda's clock-hour letter `hh` is not translated: a write, which needs the partition path,
    is refused naming the pattern, and the table is left as it was."""
    base = str(tmp_path / "t")
    clock_hours = TIMESTAMP_SETTINGS | {OUTPUT_FORMAT: "yyyy-MM-dd hh"}
    table = new_keyed_table(base, 9, "timestamp", clock_hours)
    before = listing(base)

    with pytest.raises(UnsupportedTableError, match="'yyyy-MM-dd hh' uses 'hh'"):
        HudiWriter(table).upsert(rows([1, 2], 1, "x"))

    assert listing(base) == before


@pytest.mark.spark
@pytest.mark.parametrize("generator", sorted(KEY_GENERATORS))
@pytest.mark.parametrize("service", ["compaction", "clustering"])
def test_a_service_merges_records_by_the_key_of_each_key_generator(
    spark: Any, tmp_path: Path, service: str, generator: str, table_version: int
) -> None:
    """The record key is all merging needs: the custom key generator's tables are serviced
    although their `hoodie.properties` does not say how partition paths were printed."""
    base = str(tmp_path / "t")
    model = keyed_table(base, table_version, generator)

    (compact if service == "compaction" else cluster)(spark, base)

    slices = latest_slices(base)
    assert not any(s["log_files"] for s in slices)
    assert {s["partition"] for s in slices} == EXPECTED_PARTITIONS[generator]
    assert stored_meta_values(base) == {None}
    assert_footer_key_ranges(base, simple_key if generator == "timestamp" else complex_key)
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
