"""Building metadata partitions on Spark (`index_build.build_partitions`, `catch_up`) against
real Hudi 1.1 tables and the project's own writer: what we build equals what Hudi built (record
locations, column and partition stats), and the truth read from every file slice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.hudi.test_fixture_views import unzip_fixture
from tests.hudi.test_metadata_reader import file_id_of, live_rows
from tests.hudi.test_writer import batch
from tests.hudi.test_writer_metadata_table import new_table as writer_table
from tests.hudi.test_writer_metadata_table import write_history
from tms.hudi.metadata.column_stats import ColumnRange, range_from_payload
from tms.hudi.metadata.compaction import (
    execute_metadata_compaction,
    schedule_metadata_compaction,
)
from tms.hudi.metadata.index_build import IndexWrite, build_partitions, catch_up, index_spec
from tms.hudi.metadata.partition_stats import partition_stats_entries
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import MetadataRecord
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ, METADATA_PARTITIONS, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.transitions import new_instant_time
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_FILE_VERSIONS, schedule_clean
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.testing.sample_writer.writer import HudiWriter

pytestmark = [pytest.mark.spark]

COW = "cow_v9_txns_simple_meta"
MOR = "mor_avro_v9_txns_simple_meta"

BUDGET = 16 * 1024
"""Every task's memory budget: a slice with log files is merged through local disk."""


def reader_of(root: Path) -> MetadataTableReader:
    return MetadataTableReader.open(Storage(str(root)))


def without_partitions(root: Path, partitions: tuple[str, ...]) -> HudiTable:
    """The table as it was before `partitions` were built: no folders, not listed."""
    for partition in partitions:
        shutil.rmtree(root / ".hoodie" / "metadata" / partition)
    table = HudiTable.open(str(root))
    kept = [p for p in table.config.metadata_partitions if p not in partitions]
    TableConfig({**table.config.props, METADATA_PARTITIONS: ",".join(kept)}).save(table.storage)
    return HudiTable.open(str(root))


def listed_as_built(table: HudiTable, partitions: tuple[str, ...]) -> None:
    built = [*table.config.metadata_partitions, *partitions]
    TableConfig({**table.config.props, METADATA_PARTITIONS: ",".join(built)}).save(table.storage)


def build(spark: object, table: HudiTable, partitions: tuple[str, ...]) -> tuple[str, object]:
    """Build `partitions` as of the latest completed instant; (instant, IndexWrite)."""
    timeline = table.timeline()
    latest = timeline.latest_completed()
    assert latest is not None
    metadata = reader_of(Path(table.base_path)).timeline.instants
    instant_time = new_instant_time([*timeline.instants, *metadata])
    spec = index_spec(table, timeline, list(partitions))
    written = build_partitions(
        spark,
        table,
        spec,
        as_of=latest.requested_time,
        instant_time=instant_time,
        memory_budget=BUDGET,
    )
    listed_as_built(table, partitions)
    return instant_time, written


def stats_records(reader: MetadataTableReader, partition: str) -> dict[str, dict[str, object]]:
    def fields(record: MetadataRecord) -> dict[str, object]:
        return record.fields["ColumnStatsMetadata"]  # type: ignore[no-any-return]

    return {key: fields(record) for key, record in reader.read_partition(partition).items()}


@pytest.mark.parametrize("name", [COW, MOR])
def test_record_index_built_locates_every_key_where_hudis_does(
    spark: object, tmp_path: Path, name: str
) -> None:
    reference = unzip_fixture(name, tmp_path / "reference")
    root = unzip_fixture(name, tmp_path / "built")
    table = without_partitions(root, ("record_index",))
    instant_time, written = build(spark, table, ("record_index",))

    keys = [r["_hoodie_record_key"] for r in live_rows(reference, "_hoodie_record_key")]
    assert len(keys) >= 10
    theirs = reader_of(reference).record_locations(keys)
    ours = reader_of(root).record_locations([*keys, "no-such-key"])
    assert set(theirs) == set(keys)
    assert {k: (v.partition_path, v.file_id) for k, v in ours.items()} == {
        k: (v.partition_path, v.file_id) for k, v in theirs.items()
    }
    assert written.record_keys == len(keys)  # type: ignore[attr-defined]
    assert written.file_groups == 10  # type: ignore[attr-defined]
    folder = root / ".hoodie" / "metadata" / "record_index"
    logs = sorted(p.name for p in folder.glob(".record-index-*.log.1_0-0-0"))
    assert logs == [f".record-index-{i:04d}-0_{instant_time}.log.1_0-0-0" for i in range(10)]
    hfiles = list(folder.glob(f"record-index-00*-0_*-*-*_{instant_time}.hfile"))
    assert 1 <= len(hfiles) <= 10
    assert (folder / ".hoodie_partition_metadata").is_file()
    assert not (root / ".hoodie" / "metadata" / ".hoodie" / ".temp" / instant_time).exists()
    completed = reader_of(root).timeline.get(instant_time)
    assert completed is not None and completed.is_completed


def test_stats_built_equal_the_ones_hudi_keeps(spark: object, tmp_path: Path) -> None:
    reference = unzip_fixture(COW, tmp_path / "reference")
    root = unzip_fixture(COW, tmp_path / "built")
    table = without_partitions(root, ("column_stats", "partition_stats"))
    _, written = build(spark, table, ("column_stats", "partition_stats"))

    ours, theirs = reader_of(root), reader_of(reference)
    our_files = stats_records(ours, "column_stats")
    their_files = stats_records(theirs, "column_stats")
    latest = {
        s.base_file.file_name: s.partition_path
        for s in table.file_system_view().latest_file_slices()
        if s.base_file is not None
    }
    assert {str(v["fileName"]) for v in our_files.values()} == set(latest)
    assert our_files == {k: their_files[k] for k in our_files}
    # Partition stats: the ranges of the latest files merged; Hudi's own kept the clustered-away
    # files of region=apac counted (its replacecommit quirk), so only bounds compare there.
    our_partitions = stats_records(ours, "partition_stats")
    their_partitions = stats_records(theirs, "partition_stats")
    bounds = ("fileName", "columnName", "minValue", "maxValue", "isTightBound", "valueType")
    assert {k: {f: v[f] for f in bounds} for k, v in our_partitions.items()} == {
        k: {f: v[f] for f in bounds} for k, v in their_partitions.items()
    }
    spec = index_spec(table, table.timeline(), ["column_stats", "partition_stats"])
    by_partition: dict[str, list[ColumnRange]] = {}
    for payload in their_files.values():
        partition = latest.get(str(payload["fileName"]))
        if partition is not None and not payload["isDeleted"]:
            by_partition.setdefault(partition, []).append(range_from_payload(payload))
    expected = {
        key: payload
        for partition, ranges in by_partition.items()
        for key, payload in partition_stats_entries(partition, ranges, spec.types, spec.columns)
    }
    assert our_partitions == expected
    assert written.records_written == len(our_files) + len(our_partitions)  # type: ignore[attr-defined]
    definitions = json.loads((root / ".hoodie" / ".index_defs" / "index.json").read_text())
    assert "column_stats" in definitions["indexDefinitions"]  # left as it was


def truth(root: Path) -> dict[str, tuple[str, str]]:
    """Record key → (partition, file id), read from every live row of the table's slices."""
    rows = live_rows(root, "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")
    return {
        r["_hoodie_record_key"]: (r["_hoodie_partition_path"], file_id_of(r["_hoodie_file_name"]))
        for r in rows
    }


def located(root: Path, keys: list[str]) -> dict[str, tuple[str, str]]:
    found = reader_of(root).record_locations(keys)
    return {k: (v.partition_path, v.file_id) for k, v in found.items()}


def latest_stats(root: Path) -> tuple[dict[str, dict[str, object]], dict[str, dict[str, object]]]:
    """Column stats of the latest base files, and every partition stats entry."""
    reader = reader_of(root)
    table = HudiTable.open(str(root))
    latest = {
        s.base_file.file_name
        for s in table.file_system_view().latest_file_slices()
        if s.base_file is not None
    }
    files = {
        k: v for k, v in stats_records(reader, "column_stats").items() if v["fileName"] in latest
    }
    assert {v["fileName"] for v in files.values()} == latest
    return files, stats_records(reader, "partition_stats")


def test_catch_up_brings_a_build_forward_to_what_a_fresh_build_finds(
    spark: object, tmp_path: Path
) -> None:
    root = tmp_path / "trips"
    writer = writer_table(root, COPY_ON_WRITE, 9, ("files",))
    write_history(writer)
    table = HudiTable.open(str(root))
    partitions = ("column_stats", "partition_stats", "record_index")
    timeline = table.timeline()
    since = timeline.latest_completed()
    assert since is not None
    spec = index_spec(table, timeline, list(partitions))
    instant_time = new_instant_time([*timeline.instants, *reader_of(root).timeline.instants])
    built = build_partitions(
        spark,
        table,
        spec,
        as_of=since.requested_time,
        instant_time=instant_time,
        memory_budget=BUDGET,
    )
    assert built.record_keys == len(truth(root))
    listed_as_built(HudiTable.open(str(root)), ("record_index",))
    assert located(root, [*truth(root), "k0003"]) == truth(root)
    listed = HudiTable.open(str(root))
    TableConfig({**listed.config.props, METADATA_PARTITIONS: "files"}).save(listed.storage)
    # The data table moves on while the partitions are not listed yet: new and existing file
    # groups, updates, deletes, a clustering and a clean.
    writer.insert(batch(range(100, 130), 5))
    writer.upsert(batch(range(0, 20), 6))
    writer.delete(batch([5, 50, 101], 7).select(["id", "ts", "city"]))
    clustering = schedule_clustering(HudiTable.open(str(root)))
    assert clustering is not None
    execute_clustering(spark, HudiTable.open(str(root)), clustering)  # type: ignore[arg-type]
    clean = schedule_clean(HudiTable.open(str(root)), policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    execute_clean(spark, HudiTable.open(str(root)), clean)  # type: ignore[arg-type]

    table = HudiTable.open(str(root))
    timeline = table.timeline()
    after = [i for i in timeline.completed() if i.requested_time > since.requested_time]
    assert {i.action.value for i in after} >= {"commit", "replacecommit", "clean"}
    caught_up = catch_up(
        spark,
        table,
        spec,
        after,
        since=since.requested_time,
        until=after[-1].requested_time,
        instant_time=instant_time + "010",
        memory_budget=BUDGET,
    )
    assert caught_up.record_keys > 0
    listed_as_built(table, partitions)

    expected = truth(root)
    assert {"k0005", "k0050", "k0101"}.isdisjoint(expected)
    assert located(root, [*expected, "k0005", "k0050", "k0101", "k0003"]) == expected

    fresh = without_partitions(shutil.copytree(root, tmp_path / "fresh"), partitions)
    build(spark, fresh, partitions)
    assert latest_stats(root) == latest_stats(tmp_path / "fresh")

    # The metadata table's own compaction folds the build's base files and the catch-up's logs.
    held = {p: reader_of(root).read_partition(p) for p in partitions}
    compaction = schedule_metadata_compaction(Storage(str(root)))
    assert compaction is not None
    execute_metadata_compaction(Storage(str(root)), compaction)
    assert {p: reader_of(root).read_partition(p) for p in partitions} == held


def test_catch_up_of_nothing_writes_nothing(spark: object, tmp_path: Path) -> None:
    root = tmp_path / "trips"
    writer = writer_table(root, COPY_ON_WRITE, 9, ("files",))
    write_history(writer)
    table = HudiTable.open(str(root))
    spec = index_spec(table, table.timeline(), ["record_index"])
    before = sorted(
        p.name for p in (root / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir()
    )
    written = catch_up(
        spark, table, spec, [], since="1", until="1", instant_time="2", memory_budget=BUDGET
    )
    assert written == IndexWrite(0, 0, 0, 0, 0)
    after = sorted(
        p.name for p in (root / ".hoodie" / "metadata" / ".hoodie" / "timeline").iterdir()
    )
    assert after == before


def test_record_index_of_a_merge_on_read_writer_table_is_the_truth_of_its_slices(
    spark: object, tmp_path: Path
) -> None:
    root = tmp_path / "trips"
    write_history(writer_table(root, MERGE_ON_READ, 9, ("files",)))
    table = HudiTable.open(str(root))
    assert any(
        p.name.startswith(".") and ".log." in p.name
        for p in root.rglob("*")
        if ".hoodie" not in p.parts
    )
    _, written = build(spark, table, ("record_index",))
    expected = truth(root)
    assert located(root, [*expected, "k0003", "k0044", "k0070"]) == expected
    assert written.data_file_groups == len(  # type: ignore[attr-defined]
        table.file_system_view().latest_file_slices()
    )


CATCH_UP_ACTIONS = {"commit", "deltacommit", "replacecommit", "clean"}


@pytest.mark.parametrize(
    ("name", "partitions"),
    [(COW, ("column_stats", "partition_stats", "record_index")), (MOR, ("record_index",))],
)
def test_catch_up_replays_hudis_own_instants(
    spark: object, tmp_path: Path, name: str, partitions: tuple[str, ...]
) -> None:
    """Built as of the third write of a Hudi 1.1 table, caught up over Hudi's later writes
    (updates, inserts, deletes, clustering, compaction): Hudi's record index, and our stats as a
    fresh build at the latest instant finds them."""
    reference = unzip_fixture(name, tmp_path / "reference")
    root = unzip_fixture(name, tmp_path / "caught-up")
    table = without_partitions(root, partitions)
    timeline = table.timeline()
    writes = [i for i in timeline.completed() if i.action.value in CATCH_UP_ACTIONS]
    since, later = writes[2].requested_time, writes[3:]
    assert {i.action.value for i in later} >= {"replacecommit"}
    spec = index_spec(table, timeline, list(partitions))
    instant_time = new_instant_time([*timeline.instants, *reader_of(root).timeline.instants])
    build_partitions(
        spark, table, spec, as_of=since, instant_time=instant_time, memory_budget=BUDGET
    )
    catch_up(
        spark,
        table,
        spec,
        later,
        since=since,
        until=later[-1].requested_time,
        instant_time=instant_time + "010",
        memory_budget=BUDGET,
    )
    listed_as_built(table, partitions)

    keys = [r["_hoodie_record_key"] for r in live_rows(reference, "_hoodie_record_key")]
    theirs = reader_of(reference).record_locations(keys)
    assert located(root, keys) == {k: (v.partition_path, v.file_id) for k, v in theirs.items()}
    if "column_stats" in partitions:
        fresh = without_partitions(unzip_fixture(name, tmp_path / "fresh"), partitions)
        build(spark, fresh, partitions)
        assert latest_stats(root) == latest_stats(Path(fresh.base_path))


def test_record_index_of_a_virtual_key_table_computes_its_keys(
    spark: object, tmp_path: Path
) -> None:
    """No `_hoodie_record_key` is stored: the build computes keys as the key generator does."""
    root = tmp_path / "trips"
    created = writer_table(root, COPY_ON_WRITE, 9, ("files",)).table
    virtual = {**created.config.props, "hoodie.populate.meta.fields": "false"}
    TableConfig(virtual).save(created.storage)
    table = HudiTable.open(str(root))
    write_history(HudiWriter(table, max_file_rows=40))
    expected: dict[str, tuple[str, str]] = {}
    for piece in table.file_system_view().latest_file_slices():
        assert piece.base_file is not None and not piece.log_files
        ids = pq.read_table(root / piece.base_file.path, columns=["id", "_hoodie_record_key"])
        assert set(ids.column("_hoodie_record_key").to_pylist()) == {None}
        expected |= {k: (piece.partition_path, piece.file_id) for k in ids.column("id").to_pylist()}
    assert len(expected) == 97
    build(spark, table, ("record_index",))
    assert located(root, [*expected, "k0003", "k0044", "k0070"]) == expected
