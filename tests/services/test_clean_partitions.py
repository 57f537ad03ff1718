"""The clean's deleted partitions: a partition whose file groups a replacecommit replaced
(partition TTL's `DELETE_PARTITION`) is planned for deletion once they all go
(`partitionsToBeDeleted`, Hudi's `CleanPlanner` rule), and not while a pending write's files,
a pending compaction or log compaction, a pending clustering, a savepointed file or a file
group replaced at or after the earliest retained commit still holds it; the executor deletes
its folder after its files, records `isPartitionDeleted`, and the metadata table forgets it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from tests import oracle
from tests.hudi.test_writer import batch as mdt_batch
from tests.hudi.test_writer_metadata_table import assert_metadata_table_true
from tests.hudi.test_writer_metadata_table import new_table as new_mdt_table
from tests.services.test_clean import (
    TOKEN,
    batch,
    new_table,
    write_pending_clustering,
    write_savepoint,
)
from tests.services.timeline_files import timeline_dir
from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.errors import UnsafePathError
from tms.hudi.files.data import read_base_file, write_base_file
from tms.hudi.files.fs_view import FileGroup
from tms.hudi.files.names import BaseFileName, new_file_id
from tms.hudi.metadata.index_build import files_partition
from tms.hudi.metadata.keys import PARTITION_LIST_KEY
from tms.hudi.metadata.partitions import FILES
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import partition_list_record
from tms.hudi.metadata.stats_keys import partition_identifier
from tms.hudi.metadata.updates import MetadataUpdate
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.table_paths import TablePaths
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.transitions import new_instant_time, request, transition
from tms.services.clean.execute import execute_clean, plan_partitions, schedule_clean
from tms.services.clean.plan import (
    KEEP_LATEST_COMMITS,
    KEEP_LATEST_FILE_VERSIONS,
    CleanPlanner,
)
from tms.services.metadata_sync import MetadataSync
from tms.testing.sample_writer.writer import HudiWriter

NOT_LA = [i for i in range(30) if i % 3 != 2]
"""Keys of sf and nyc: upserts of these leave la alone."""
LA = [i for i in range(30) if i % 3 == 2]


def la_table(tmp_path: Path, table_version: int, table_type: str = COPY_ON_WRITE) -> HudiTable:
    """30 keys over sf, nyc and la, 5 to a file group: la has two file groups."""
    _, writer = new_table(tmp_path, table_type, table_version=table_version)
    writer.insert(batch(range(30), ts=1))
    return writer.table


def upsert_elsewhere(table: HudiTable, times: int, ts: int = 10) -> None:
    """`times` upserts of sf and nyc."""
    writer = HudiWriter(table, max_file_rows=5)
    for n in range(times):
        writer.upsert(batch(NOT_LA, ts=ts + n))


def groups_of(table: HudiTable, partition: str) -> list[FileGroup]:
    return sorted(
        (g for g in table.file_system_view().file_groups if g.partition_path == partition),
        key=lambda g: g.file_id,
    )


def delete_partition(table: HudiTable, partition: str, file_ids: list[str] | None = None) -> str:
    """A `DELETE_PARTITION` replacecommit of the partition's file groups (all, or
    `file_ids`), as partition TTL's writes it: no write stats."""
    storage, config = table.storage, table.config
    timeline = table.timeline()
    ids = file_ids or [g.file_id for g in groups_of(table, partition)]
    ts = new_instant_time(timeline.instants)
    requested = avro_codec.encode(
        "HoodieRequestedReplaceMetadata", {"operationType": "DELETE_PARTITION"}
    )
    inflight = transition(
        storage,
        config,
        request(storage, config, ts, Action.REPLACE_COMMIT, requested),
        State.INFLIGHT,
    )
    metadata = ReplaceCommitMetadata(
        operation_type="DELETE_PARTITION",
        extra_metadata={"schema": timeline.latest_schema() or ""},
        partition_to_replace_file_ids={partition: ids},
    )
    sync = MetadataSync.of(table, timeline)
    if sync is not None:  # its delta commit: no file comes or goes until the clean
        sync.write(ts, MetadataUpdate(records={FILES: []}))
    transition(storage, config, inflight, State.COMPLETED, metadata)
    return ts


def plan_of(table: HudiTable, instant: str | None) -> dict[str, Any]:
    assert instant is not None
    plan = table.timeline().avro_details(
        Instant(instant, Action.CLEAN, State.REQUESTED), State.REQUESTED
    )
    assert plan is not None
    return plan


def planned_names(plan: dict[str, Any], partition: str) -> set[str]:
    infos = plan["filePathsToBeDeletedPerPartition"].get(partition) or []
    return {Path(info["filePath"]).name for info in infos}


def names_of(groups: list[FileGroup]) -> set[str]:
    return {Path(p).name for g in groups for s in g.slices for p in s.paths}


def drop_plan(table: HudiTable, instant: str) -> None:
    """Forget a scheduled clean, to plan again on the same files."""
    for path in timeline_dir(table.storage.base_path).glob(f"{instant}.clean*"):
        path.unlink()


# Planning ---------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_COMMITS])
def test_a_partition_whose_replaced_file_groups_all_go_is_planned_for_deletion(
    tmp_path: Path, table_version: int, policy: str
) -> None:
    table = la_table(tmp_path, table_version)
    la = groups_of(table, "la")
    assert len(la) == 2
    delete_partition(table, "la")
    upsert_elsewhere(table, 2)  # i R u1 u2: by commits (2 retained) u1 is the earliest kept

    plan = plan_of(table, schedule_clean(table, policy=policy, retained=2))

    assert plan["partitionsToBeDeleted"] == ["la"]
    assert planned_names(plan, "la") == names_of(la)


def test_a_table_without_replaced_partitions_plans_none(tmp_path: Path, table_version: int) -> None:
    table = la_table(tmp_path, table_version)
    upsert_elsewhere(table, 2)
    plan = plan_of(table, schedule_clean(table, policy=KEEP_LATEST_FILE_VERSIONS, retained=1))
    assert plan["partitionsToBeDeleted"] == []
    assert planned_names(plan, "la") == set()


def test_a_file_group_replaced_at_or_after_the_earliest_retained_commit_keeps_the_partition(
    tmp_path: Path, table_version: int
) -> None:
    table = la_table(tmp_path, table_version)
    first, second = groups_of(table, "la")
    delete_partition(table, "la", [first.file_id])  # R1
    upsert_elsewhere(table, 2)
    delete_partition(table, "la", [second.file_id])  # R2
    upsert_elsewhere(table, 1, ts=20)  # i R1 u1 u2 R2 u3: 3 retained keep from u2 on

    instant = schedule_clean(table, policy=KEEP_LATEST_COMMITS, retained=3)
    plan = plan_of(table, instant)
    assert planned_names(plan, "la") == names_of([first])  # replaced before u2: it goes
    assert plan["partitionsToBeDeleted"] == []  # R2 is after u2 (noSubsequentReplaceCommit)

    assert instant is not None
    drop_plan(table, instant)
    upsert_elsewhere(table, 2, ts=30)  # … R2 u3 u4 u5: the earliest kept is u3, after R2
    plan = plan_of(table, schedule_clean(table, policy=KEEP_LATEST_COMMITS, retained=3))
    assert planned_names(plan, "la") == names_of([first, second])
    assert plan["partitionsToBeDeleted"] == ["la"]


def test_a_pending_writes_files_keep_the_partition(tmp_path: Path, table_version: int) -> None:
    table = la_table(tmp_path, table_version)
    la = groups_of(table, "la")
    delete_partition(table, "la")
    upsert_elsewhere(table, 1)
    storage, config = table.storage, table.config
    pending = new_instant_time(table.timeline().instants)  # a write into la, not committed
    request(storage, config, pending, Action.COMMIT)
    source = la[0].latest_slice.base_file
    assert source is not None
    rows = read_base_file(storage, source.path)
    write_base_file(storage, f"la/{BaseFileName(new_file_id(), TOKEN, pending)}", rows)

    plan = plan_of(table, schedule_clean(table, policy=KEEP_LATEST_FILE_VERSIONS, retained=1))

    assert planned_names(plan, "la") == names_of(la)  # the replaced files go
    assert plan["partitionsToBeDeleted"] == []  # the folder stays (hasPendingFiles)


def protect(table: HudiTable, kind: str, target: FileGroup) -> None:
    """What keeps `target`'s latest slice from the clean: a savepoint of it, a pending
    compaction or log compaction reading it, a pending clustering of it."""
    piece = target.latest_slice
    assert piece.base_file is not None
    if kind == "savepoint":
        write_savepoint(table, piece.base_instant_time, {"la": [piece.base_file.file_name]})
        return
    if kind == "clustering":
        write_pending_clustering(table, piece)
        return
    operation = {
        "baseInstantTime": piece.base_instant_time,
        "deltaFilePaths": [],
        "dataFilePath": piece.base_file.file_name,
        "fileId": piece.file_id,
        "partitionPath": "la",
    }
    plan = avro_codec.encode("HoodieCompactionPlan", {"operations": [operation], "version": 2})
    action = Action.COMPACTION if kind == "compaction" else Action.LOG_COMPACTION
    ts = new_instant_time(table.timeline().instants)
    request(table.storage, table.config, ts, action, plan)


@pytest.mark.parametrize("kind", ["savepoint", "compaction", "clustering"])
def test_a_file_the_clean_spares_keeps_the_partition(
    tmp_path: Path, table_version: int, kind: str
) -> None:
    table = la_table(tmp_path, table_version, MERGE_ON_READ)
    kept, other = groups_of(table, "la")
    protect(table, kind, kept)
    delete_partition(table, "la")
    upsert_elsewhere(table, 1)

    plan = plan_of(table, schedule_clean(table, policy=KEEP_LATEST_FILE_VERSIONS, retained=1))

    assert planned_names(plan, "la") == names_of([other])
    assert plan["partitionsToBeDeleted"] == []


def test_a_pending_log_compaction_keeps_the_partition(tmp_path: Path, table_version: int) -> None:
    """The planner's own rule: the services refuse a table with a pending log compaction
    (`table_refusals`) before any clean is planned, yet the slices it reads are spared as
    Hudi spares them (`isFileSliceNeededForPendingLogCompaction`), and so is the partition."""
    table = la_table(tmp_path, table_version, MERGE_ON_READ)
    kept, other = groups_of(table, "la")
    protect(table, "log_compaction", kept)
    delete_partition(table, "la")
    upsert_elsewhere(table, 1)

    planner = CleanPlanner.build(table, table.timeline())
    files = planner.keep_latest_file_versions(1)

    assert {Path(p).name for p in files["la"]} == names_of([other])
    assert planner.emptied_partitions(None, files) == []


def test_plan_partitions_confines_them_to_a_partitioned_table(tmp_path: Path) -> None:
    paths = TablePaths(Storage(str(tmp_path)), "clean plan 1")
    plan = {"partitionsToBeDeleted": ["la", "", "la", "sf/x"]}
    assert plan_partitions(plan, paths, partitioned=True) == ["la", "sf/x"]
    assert plan_partitions(plan, paths, partitioned=False) == []
    for bad in ("../outside", ".hoodie", "/abs"):
        with pytest.raises(UnsafePathError):
            plan_partitions({"partitionsToBeDeleted": [bad]}, paths, partitioned=True)


def test_a_plan_deleting_a_partition_outside_the_table_is_refused_before_anything(
    tmp_path: Path, table_version: int
) -> None:
    table = la_table(tmp_path, table_version)
    delete_partition(table, "la")
    upsert_elsewhere(table, 1)
    instant = schedule_clean(table, policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    plan = plan_of(table, instant)
    assert instant is not None
    plan["partitionsToBeDeleted"] = ["la", "../outside"]
    requested = Path(timeline_dir(table.storage.base_path), f"{instant}.clean.requested")
    requested.write_bytes(avro_codec.encode("HoodieCleanerPlan", plan))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")

    with pytest.raises(UnsafePathError, match="outside"):
        execute_clean(cast(Any, None), HudiTable.open(table.storage.base_path), instant)

    assert (outside / "keep").exists() and Path(table.storage.base_path, "la").is_dir()
    pending = table.timeline().get(instant)
    assert pending is not None and pending.state is State.REQUESTED


# Executing --------------------------------------------------------------------------------


def clean_metadata(table: HudiTable, instant: str) -> dict[str, Any]:
    done = table.timeline().get(instant)
    assert done is not None and done.is_completed
    metadata = table.timeline().avro_details(done, State.COMPLETED)
    assert metadata is not None
    return metadata


@pytest.mark.spark
def test_the_clean_deletes_the_partition_and_writers_write_into_it_again(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    table = la_table(tmp_path, table_version)
    base = table.storage.base_path
    delete_partition(table, "la")
    upsert_elsewhere(table, 2)
    rows = oracle.snapshot(base)
    assert set(rows["city"].to_pylist()) == {"sf", "nyc"}
    instant = schedule_clean(table, policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert instant is not None

    result = execute_clean(spark, HudiTable.open(base), instant, heartbeat_interval=5)

    assert not Path(base, "la").exists()
    assert Path(base, "sf").is_dir() and Path(base, "nyc").is_dir()
    partitions = clean_metadata(table, instant)["partitionMetadata"]
    assert {p: m["isPartitionDeleted"] for p, m in partitions.items()} == {
        p: p == "la" for p in partitions
    }
    assert partitions["la"]["successDeleteFiles"]
    assert result.files_deleted == sum(len(m["successDeleteFiles"]) for m in partitions.values())
    assert oracle.snapshot(base).equals(rows)

    HudiWriter(HudiTable.open(base), max_file_rows=5).insert(batch(LA, ts=40))
    again = oracle.snapshot(base)
    assert sorted(r for r in again["id"].to_pylist() if int(r[1:]) % 3 == 2) == sorted(
        f"k{i:03d}" for i in LA
    )
    assert schedule_clean(HudiTable.open(base), policy=KEEP_LATEST_FILE_VERSIONS) is None


@pytest.mark.spark
def test_a_partition_written_into_after_the_plan_stays(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    table = la_table(tmp_path, table_version)
    base = table.storage.base_path
    la = groups_of(table, "la")
    delete_partition(table, "la")
    upsert_elsewhere(table, 1)
    instant = schedule_clean(table, policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert plan_of(table, instant)["partitionsToBeDeleted"] == ["la"]
    assert instant is not None
    HudiWriter(HudiTable.open(base), max_file_rows=5).insert(batch(LA[:3], ts=40))
    rows = oracle.snapshot(base)

    execute_clean(spark, HudiTable.open(base), instant, heartbeat_interval=5)

    assert not {p.name for p in Path(base, "la").iterdir()} & names_of(la)
    assert groups_of(HudiTable.open(base), "la")  # the new file group is there
    assert oracle.snapshot(base).equals(rows)
    assert not clean_metadata(table, instant)["partitionMetadata"]["la"]["isPartitionDeleted"]


@pytest.mark.spark
def test_the_metadata_table_forgets_the_deleted_partition(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    writer = new_mdt_table(root, COPY_ON_WRITE, 9, ("files",))
    writer.insert(mdt_batch(range(0, 60), 1))
    table = writer.table
    delete_partition(table, "la")
    for ts in (2, 3):
        writer.upsert(mdt_batch([i for i in range(60) if i % 3 != 2], ts))
    reader = MetadataTableReader.open(Storage(str(root)))
    assert "la" in reader.read_partition(FILES)
    instant = schedule_clean(HudiTable.open(str(root)), policy=KEEP_LATEST_COMMITS, retained=1)
    assert plan_of(table, instant)["partitionsToBeDeleted"] == ["la"]
    assert instant is not None

    execute_clean(spark, HudiTable.open(str(root)), instant, heartbeat_interval=5)

    assert not (root / "la").exists()
    records = MetadataTableReader.open(Storage(str(root))).read_partition(FILES)
    assert "la" not in records
    listed = records[PARTITION_LIST_KEY].live_files()
    assert sorted(listed) == ["nyc", "sf"]
    assert_metadata_table_true(root, tmp_path)
    # a files index built by tms that catches up on this clean forgets the partition too
    timeline = HudiTable.open(str(root)).timeline()
    caught_up = files_partition._files_update(timeline, timeline.get(instant))
    assert caught_up.deletes == {FILES: [partition_identifier("la")]}
    (listing,) = [r for r in caught_up.records[FILES] if r.key == PARTITION_LIST_KEY]
    assert listing == partition_list_record(["la"], deleted=True)
