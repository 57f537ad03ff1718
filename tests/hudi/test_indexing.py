"""The `indexing` protocol on storage: plan and commit metadata in Hudi's Avro, what scheduling
refuses, drop, and an abort that leaves the table as it was before the plan."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from tests import oracle
from tests.hudi.test_fixture_views import unzip_fixture
from tests.hudi.test_metadata_reader import file_id_of, live_rows
from tests.hudi.test_writer import batch
from tests.hudi.test_writer_metadata_table import new_table

from tms.hudi.avro import codec
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.index_defs import read_index_definitions
from tms.hudi.metadata.indexing import (
    IndexCommitMetadata,
    IndexPartitionInfo,
    IndexPlan,
    abort_indexing,
    catch_up_time,
    drop_partitions,
    index_up_to,
    inflight_partitions,
    mark_inflight,
    pending_indexing,
    read_plan,
    schedule_indexing,
)
from tms.hudi.metadata.reader import MetadataTableReader, metadata_storage
from tms.hudi.properties import COPY_ON_WRITE, TableConfig, parse_properties
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import request, transition
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

FIXTURE = "cow_v9_txns_simple_meta"


def own_table(root: Path, partitions: tuple[str, ...] = ("files",), version: int = 9) -> HudiWriter:
    writer = new_table(root, COPY_ON_WRITE, version, partitions)
    writer.insert(batch(range(0, 30), 1))
    writer.upsert(batch(range(20, 40), 2))
    return writer


def storage_of(root: Path) -> Storage:
    return Storage(str(root))


def config_of(root: Path) -> TableConfig:
    return TableConfig.load(storage_of(root))


def files_of(root: Path) -> dict[str, str]:
    """Every file's digest; `hoodie.properties` by its properties (its first line is the time
    it was written)."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        name = str(path.relative_to(root))
        if name.endswith(".hoodie/hoodie.properties"):
            props = parse_properties(path.read_text())
            out[name] = json.dumps(props, sort_keys=True)
        else:
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


# Plan and commit metadata ----------------------------------------------------------------------


def test_the_plan_is_hudis_avro_read_back_from_the_timeline(tmp_path: Path) -> None:
    writer = own_table(tmp_path / "t")
    storage = writer.storage
    extra = {"columns": "id,ts", "indexVersion": "V2"}
    instant_time = schedule_indexing(
        storage, ["record_index", "column_stats"], {"column_stats": extra}
    )
    timeline = HudiTable.open(str(tmp_path / "t")).timeline()
    [pending] = pending_indexing(timeline)
    assert pending == Instant(instant_time, Action.INDEXING, State.REQUESTED)
    assert (
        tmp_path / "t" / ".hoodie" / "timeline" / f"{instant_time}.indexing.requested"
    ).is_file()
    up_to = timeline.commits()[-1].requested_time
    assert timeline.avro_details(pending, State.REQUESTED) == {
        "version": 1,
        "indexPartitionInfos": [
            {
                "version": 1,
                "metadataPartitionPath": "column_stats",
                "indexUptoInstant": up_to,
                "extraMetadata": extra,
            },
            {
                "version": 1,
                "metadataPartitionPath": "record_index",
                "indexUptoInstant": up_to,
                "extraMetadata": None,
            },
        ],
    }
    plan = read_plan(timeline, pending)
    assert plan.partitions == ("column_stats", "record_index")
    assert plan.up_to == up_to
    assert plan.extra("column_stats") == extra


def test_commit_metadata_round_trips_through_hudis_schema() -> None:
    metadata = IndexCommitMetadata(
        (IndexPartitionInfo("record_index", "20260101000000000"),), operation_type=None
    )
    record = codec.decode(metadata.to_bytes())
    assert record == {
        "version": 1,
        "operationType": None,
        "indexPartitionInfos": [
            {
                "version": 1,
                "metadataPartitionPath": "record_index",
                "indexUptoInstant": "20260101000000000",
                "extraMetadata": None,
            }
        ],
    }
    assert IndexCommitMetadata.from_avro(record) == metadata
    plan = IndexPlan((IndexPartitionInfo("column_stats", "1", {"a": "b"}),))
    assert IndexPlan.from_avro(codec.decode(plan.to_bytes())) == plan


# Scheduling ----------------------------------------------------------------------------------


def test_up_to_stops_before_the_first_pending_write(tmp_path: Path) -> None:
    writer = own_table(tmp_path / "t")
    first, second = (i.requested_time for i in writer.table.timeline().commits())
    assert index_up_to(writer.table.timeline()) == writer.table.timeline().get(second)
    # a commit requested between the two (still pending) holds U at the first
    between = first[:-3] + f"{int(first[-3:]) + 1:03d}"
    assert first < between < second
    request(writer.storage, writer.config, between, Action.COMMIT)
    assert index_up_to(writer.table.timeline()) == writer.table.timeline().get(first)


REFUSALS = {
    "built": (("files", "record_index"), ["record_index"], "record_index is already built"),
    "unknown": (("files",), ["bloom_filters"], "'bloom_filters' is not a metadata partition"),
    "files": (("files",), ["files"], "metadata partition files is already built"),
    "none": (("files",), [], "at least one"),
    "no metadata table": ((), ["record_index"], "no metadata table"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_schedule_refuses_with_the_reason_and_writes_nothing(tmp_path: Path, case: str) -> None:
    partitions, asked, reason = REFUSALS[case]
    root = tmp_path / "t"
    own_table(root, partitions)
    before = files_of(root)
    with pytest.raises(UnsupportedTableError, match=reason):
        schedule_indexing(storage_of(root), asked)
    assert files_of(root) == before


def test_schedule_refuses_a_second_build_and_an_inflight_partition(tmp_path: Path) -> None:
    root = tmp_path / "t"
    writer = own_table(root)
    first = schedule_indexing(writer.storage, ["record_index"])
    with pytest.raises(UnsupportedTableError, match=f"indexing {first} is pending"):
        schedule_indexing(writer.storage, ["column_stats"])
    mark_inflight(writer.storage, ["record_index"])
    abort_indexing(writer.storage, first, [], keep_plan=False)  # the plan goes, the mark stays
    with pytest.raises(UnsupportedTableError, match="record_index is already being built"):
        schedule_indexing(writer.storage, ["record_index"])


def test_a_version_6_table_with_a_metadata_table_is_indexed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    own_table(root, ("files",), version=6)
    instant_time = schedule_indexing(storage_of(root), ["record_index"])
    assert (root / ".hoodie" / f"{instant_time}.indexing.requested").is_file()


def test_schedule_refuses_a_table_without_a_completed_write(tmp_path: Path) -> None:
    create_table(
        str(tmp_path / "t"),
        "trips",
        table_type=COPY_ON_WRITE,
        record_key_fields=["id"],
        ordering_field="ts",
        schema=batch([0], 0).schema,
        table_version=9,
        metadata_partitions=("files",),
    )
    with pytest.raises(UnsupportedTableError, match="no completed write"):
        schedule_indexing(storage_of(tmp_path / "t"), ["record_index"])


# Abort -----------------------------------------------------------------------------------------


def test_abort_leaves_the_table_as_before_the_plan(tmp_path: Path) -> None:
    """A build's traces of every kind: the plan, inflight, the partition listed inflight,
    its folder, the metadata table's delta commits `T` (completed) and `T010` (inflight) with
    markers. The abort removes all of them."""
    root = tmp_path / "t"
    writer = own_table(root)
    before = files_of(root)
    storage = writer.storage
    instant_time = schedule_indexing(storage, ["record_index"])
    timeline = HudiTable.open(str(root)).timeline()
    [requested] = pending_indexing(timeline)
    transition(storage, writer.config, requested, State.INFLIGHT)
    md = metadata_storage(storage)
    md_config = TableConfig.load(md)
    build = request(md, md_config, instant_time, Action.DELTA_COMMIT)
    build = transition(md, md_config, build, State.INFLIGHT)
    md.write_bytes(f"record_index/record-index-0000-0_0-1-1_{instant_time}.hfile", b"x")
    md.write_bytes("record_index/.hoodie_partition_metadata", b"x")
    transition(md, md_config, build, State.COMPLETED)
    mark_inflight(storage, ["record_index"])
    assert inflight_partitions(config_of(root)) == ["record_index"]
    catch_up = request(md, md_config, catch_up_time(instant_time), Action.DELTA_COMMIT)
    transition(md, md_config, catch_up, State.INFLIGHT)
    md.write_bytes(f".hoodie/.temp/{catch_up_time(instant_time)}/record_index/x.marker", b"")
    assert files_of(root) != before

    abort_indexing(storage, instant_time, ["record_index"])

    assert files_of(root) == before
    assert not (root / ".hoodie" / "metadata" / "record_index").exists()


def test_abort_keeping_the_plan_leaves_it_requested(tmp_path: Path) -> None:
    writer = own_table(tmp_path / "t")
    instant_time = schedule_indexing(writer.storage, ["record_index"])
    [requested] = pending_indexing(writer.table.timeline())
    transition(writer.storage, writer.config, requested, State.INFLIGHT)
    abort_indexing(writer.storage, instant_time, ["record_index"], keep_plan=True)
    assert pending_indexing(writer.table.timeline()) == [requested]


# Drop ------------------------------------------------------------------------------------------


def test_drop_on_our_table_removes_config_definitions_and_folder(tmp_path: Path) -> None:
    root = tmp_path / "t"
    writer = own_table(root, ("files", "column_stats", "record_index"))
    rows = oracle.rows_by_key(str(root))
    assert drop_partitions(writer.storage, ["record_index", "column_stats"]) == [
        "record_index",
        "column_stats",
    ]
    config = config_of(root)
    assert config.metadata_partitions == ["files"]
    assert read_index_definitions(storage_of(root), config) == {}
    assert not (root / ".hoodie" / "metadata" / "record_index").exists()
    assert not (root / ".hoodie" / "metadata" / "column_stats").exists()
    assert oracle.rows_by_key(str(root)) == rows
    # the writer goes on with the metadata table it has left
    HudiWriter(HudiTable.open(str(root))).upsert(batch(range(35, 45), 3))
    assert MetadataTableReader.open(storage_of(root)).partitions == ["files"]


def test_drop_on_the_fixture(tmp_path: Path) -> None:
    root = unzip_fixture(FIXTURE, tmp_path / "fx")
    rows = oracle.rows_by_key(str(root))
    storage = storage_of(root)
    with pytest.raises(UnsupportedTableError, match="drop partition_stats with it"):
        drop_partitions(storage, ["column_stats"])
    drop_partitions(storage, ["record_index"])
    drop_partitions(storage, ["column_stats", "partition_stats"])
    config = config_of(root)
    assert config.metadata_partitions == [
        "files",
        "secondary_index_merchant_idx",
        "secondary_index_txn_date_idx",
    ]
    definitions = read_index_definitions(storage, config)
    assert sorted(definitions) == ["secondary_index_merchant_idx", "secondary_index_txn_date_idx"]
    for gone in ("record_index", "column_stats", "partition_stats"):
        assert not (root / ".hoodie" / "metadata" / gone).exists()
    assert oracle.rows_by_key(str(root)) == rows


def test_dropping_files_drops_the_metadata_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    writer = own_table(root, ("files", "record_index"))
    rows = oracle.rows_by_key(str(root))
    drop_partitions(writer.storage, ["files"])
    assert config_of(root).metadata_partitions == []
    assert not (root / ".hoodie" / "metadata").exists()
    assert oracle.rows_by_key(str(root)) == rows
    HudiWriter(HudiTable.open(str(root))).upsert(batch(range(35, 45), 3))


def test_drop_refuses_what_is_not_built_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    writer = own_table(root)
    before = files_of(root)
    with pytest.raises(UnsupportedTableError, match="record_index is not built"):
        drop_partitions(writer.storage, ["record_index"])
    assert files_of(root) == before


def test_properties_keep_hudis_sorted_partition_lists(tmp_path: Path) -> None:
    root = tmp_path / "t"
    writer = own_table(root)
    mark_inflight(writer.storage, ["record_index", "column_stats"])
    text = (root / ".hoodie" / "hoodie.properties").read_text()
    assert re.search(
        r"(?m)^hoodie\.table\.metadata\.partitions\.inflight=column_stats,record_index$", text
    )


# The writer and partitions being built ---------------------------------------------------------


def move_to_inflight(root: Path, partition: str) -> None:
    """List a built partition as being built (its file groups stay): what a build's MARK
    leaves."""
    storage = storage_of(root)
    config = config_of(root)
    props = dict(config.props)
    props["hoodie.table.metadata.partitions"] = ",".join(
        p for p in config.metadata_partitions if p != partition
    )
    TableConfig(props).save(storage)
    mark_inflight(storage, [partition])


def record_index_is_true(root: Path) -> None:
    """Every live key at the file group holding it (the truth read from the file slices)."""
    rows = live_rows(root, "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")
    expected = {
        r["_hoodie_record_key"]: (r["_hoodie_partition_path"], file_id_of(r["_hoodie_file_name"]))
        for r in rows
    }
    located = MetadataTableReader.open(storage_of(root)).record_locations(list(expected))
    assert {k: (v.partition_path, v.file_id) for k, v in located.items()} == expected


def test_the_writer_logs_to_a_partition_being_built_once_it_has_file_groups(
    tmp_path: Path,
) -> None:
    root = tmp_path / "t"
    own_table(root, ("files", "record_index"))
    move_to_inflight(root, "record_index")
    writer = HudiWriter(HudiTable.open(str(root)), max_file_rows=40)
    writer.upsert(batch(range(35, 60), 3))
    writer.delete(batch([1, 36], 4).select(["id", "ts", "city"]))
    logged = sorted((root / ".hoodie" / "metadata" / "record_index").glob(".record-index-*"))
    instants = {p.name.split("_")[1].split(".")[0] for p in logged}
    assert {
        i.requested_time for i in HudiTable.open(str(root)).timeline().commits()[-2:]
    } <= instants
    # listed built again, the record index holds the keys both commits wrote and deleted
    props = dict(config_of(root).props)
    props["hoodie.table.metadata.partitions"] = "files,record_index"
    props["hoodie.table.metadata.partitions.inflight"] = ""
    TableConfig(props).save(storage_of(root))
    record_index_is_true(root)
    assert MetadataTableReader.open(storage_of(root)).record_locations(["k0001", "k0036"]) == {}


def test_the_writer_skips_a_partition_being_built_without_file_groups(tmp_path: Path) -> None:
    root = tmp_path / "t"
    own_table(root)
    mark_inflight(storage_of(root), ["record_index"])
    HudiWriter(HudiTable.open(str(root))).upsert(batch(range(35, 45), 3))
    assert not (root / ".hoodie" / "metadata" / "record_index").exists()


def test_the_writer_reads_the_config_after_requesting_its_instant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition listed inflight between the writer's first look and its requested instant
    (the build waits only for instants pending at its mark) gets the commit's log blocks."""
    import tms.testing.sample_writer.writer as writer_module

    root = tmp_path / "t"
    own_table(root, ("files", "record_index"))
    props = dict(config_of(root).props)
    props["hoodie.table.metadata.partitions"] = "files"
    TableConfig(props).save(storage_of(root))
    writer = HudiWriter(HudiTable.open(str(root)))
    requested = writer_module.request

    def request_then_mark(*args: object, **kwargs: object) -> Instant:
        instant = requested(*args, **kwargs)  # type: ignore[arg-type]
        mark_inflight(storage_of(root), ["record_index"])
        return instant

    monkeypatch.setattr(writer_module, "request", request_then_mark)
    instant_time = writer.upsert(batch(range(35, 45), 3))
    logged = list((root / ".hoodie" / "metadata" / "record_index").glob(f"*_{instant_time}.log.*"))
    assert logged
