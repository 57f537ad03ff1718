"""Clean against the oracle: old file versions go, every read the policy promises still works."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests import oracle
from tests.services.timeline_files import timeline_dir
from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.commit_metadata import CommitMetadata, ReplaceCommitMetadata
from tms.hudi.avro.schema import avro_record_schema
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import InstantInFlightError, PlanNotFoundError, UnsupportedTableError
from tms.hudi.files.data import read_base_file, write_base_file, write_log_file
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.files.names import BaseFileName, LogFileName, new_file_id
from tms.hudi.files.reader import read_file_slice
from tms.hudi.meta_fields import COMMIT_TIME, FILE_NAME
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.layout import TimelineLayout
from tms.hudi.timeline.transitions import new_instant_time, request, transition
from tms.services.clean.execute import execute_clean, schedule_clean
from tms.services.clean.plan import earliest_commit_to_retain
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

CITIES = ("sf", "nyc", "la")
TOKEN = "0-1-0"


def batch(ids: list[int] | range, ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:03d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": pa.array([CITIES[i % 3] for i in ids]),
            "fare": pa.array([float(i) + ts / 100 for i in ids]),
        }
    )


def new_table(
    tmp_path: Path, table_type: str, partitioned: bool = True, table_version: int = 6
) -> tuple[str, HudiWriter]:
    base = str(tmp_path / "trips")
    table = create_table(
        base,
        "trips",
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"] if partitioned else [],
        table_version=table_version,
    )
    return base, HudiWriter(table, max_file_rows=5)


def cow_with_versions(tmp_path: Path, upserts: int = 4, table_version: int = 6) -> str:
    """30 keys in 6 file groups; sf and nyc groups rewritten by every upsert, la never."""
    base, writer = new_table(tmp_path, COPY_ON_WRITE, table_version=table_version)
    writer.insert(batch(range(30), ts=1))
    for n in range(upserts):
        writer.upsert(batch([i for i in range(30) if i % 3 != 2], ts=10 + n))
    return base


def slices_on_disk(base: str) -> dict[tuple[str, str], set[str]]:
    """Base instants of the slices whose files are on disk, per (partition, file id),
    replaced file groups included. A layout 2 log file names its delta commit, not its
    slice, so slices come from the file-system view (checked against hudi-rs elsewhere)
    of a timeline whose replacecommits count as plain commits."""
    table = HudiTable.open(base)
    timeline = table.timeline()
    unreplaced = dataclasses.replace(
        timeline,
        instants=tuple(
            Instant(i.requested_time, Action.COMMIT, i.state, i.completion_time)
            if i.action is Action.REPLACE_COMMIT and i.is_completed
            else i
            for i in timeline.instants
        ),
    )
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    for group in table.file_system_view(unreplaced).file_groups:
        for piece in group.slices:
            if any(Path(base, p).is_file() for p in piece.paths):
                found[(group.partition_path, group.file_id)].add(piece.base_instant_time)
    return dict(found)


def planned_paths(table: HudiTable, instant: str) -> list[str]:
    plan = table.timeline().avro_details(
        Instant(instant, Action.CLEAN, State.REQUESTED), State.REQUESTED
    )
    assert plan is not None
    return sorted(
        info["filePath"]
        for infos in plan["filePathsToBeDeletedPerPartition"].values()
        for info in infos
    )


def read_state(base: str) -> tuple[pa.Table, list[dict[str, Any]], list[tuple[str, str]]]:
    return oracle.snapshot(base), oracle.file_slices(base), oracle.completed_instants(base)


def clean_and_check(spark: Any, base: str, **kwargs: Any) -> tuple[str, list[str]]:
    """Schedule and execute a clean; the oracle must read the same table before and after."""
    table = HudiTable.open(base)
    before = read_state(base)
    instant = schedule_clean(table, **kwargs)
    assert instant is not None
    paths = planned_paths(table, instant)
    assert paths and all(Path(p).is_file() for p in paths)
    result = execute_clean(spark, table, instant, heartbeat_interval=5)
    assert result.files_deleted == len(paths)
    assert not any(Path(p).exists() for p in paths)
    after = read_state(base)
    assert after[0].equals(before[0])
    assert after[1:] == before[1:]
    return instant, paths


# Scheduling without Spark -----------------------------------------------------------------


def test_schedule_refuses_unknown_policy_and_retained_below_one(
    tmp_path: Path, table_version: int
) -> None:
    base = cow_with_versions(tmp_path, upserts=1, table_version=table_version)
    table = HudiTable.open(base)
    with pytest.raises(ValueError, match="KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS"):
        schedule_clean(table, policy="KEEP_LATEST_BY_HOURS")
    with pytest.raises(ValueError, match="at least 1"):
        schedule_clean(table, policy="KEEP_LATEST_FILE_VERSIONS", retained=0)
    assert not table.timeline().pending((Action.CLEAN,))


def test_nothing_to_clean_writes_no_plan(tmp_path: Path, table_version: int) -> None:
    base = cow_with_versions(tmp_path, upserts=4, table_version=table_version)  # 5 commits
    table = HudiTable.open(base)
    assert schedule_clean(table, retained=5) is None  # all commits retained
    assert schedule_clean(table, retained=4) is None  # the 4 retained + the slice before them
    assert schedule_clean(table, policy="KEEP_LATEST_FILE_VERSIONS", retained=5) is None
    assert not [i for i in table.timeline().instants if i.action is Action.CLEAN]


def test_unsupported_table_is_refused_before_writing(tmp_path: Path, table_version: int) -> None:
    base = cow_with_versions(tmp_path, upserts=2, table_version=table_version)
    props = Path(base, ".hoodie/hoodie.properties")
    props.write_text(props.read_text() + "hoodie.table.metadata.partitions=files\n")
    with pytest.raises(UnsupportedTableError, match="metadata table"):
        schedule_clean(HudiTable.open(base), policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert not list(timeline_dir(base).glob("*.clean*"))


def test_earliest_retained_commit_stops_before_a_pending_write(
    tmp_path: Path, table_version: int
) -> None:
    base, writer = new_table(tmp_path, COPY_ON_WRITE, table_version=table_version)
    writer.insert(batch(range(30), ts=1))
    for n in range(2):
        writer.upsert(batch(range(30), ts=10 + n))
    table = writer.table
    crashed = new_instant_time(table.timeline().instants)  # a write that never completed
    transition(
        table.storage,
        table.config,
        request(table.storage, table.config, crashed, Action.COMMIT),
        State.INFLIGHT,
    )
    for n in range(2):
        writer.upsert(batch(range(30), ts=20 + n))
    commits = [i.requested_time for i in table.timeline().commits()]  # i u1 u2 (crashed) u3 u4
    assert len(commits) == 5

    for retained, expected in ((4, commits[1]), (3, commits[2]), (2, commits[2]), (1, commits[2])):
        earliest = earliest_commit_to_retain(table.timeline(), retained)
        assert earliest is not None and earliest.requested_time == expected
    assert earliest_commit_to_retain(table.timeline(), 5) is None
    # the crashed write may still need what u2 left; after its rollback u3 is the earliest
    Path(timeline_dir(base), f"{crashed}.inflight").unlink()
    Path(timeline_dir(base), f"{crashed}.commit.requested").unlink()
    earliest = earliest_commit_to_retain(table.timeline(), 2)
    assert earliest is not None and earliest.requested_time == commits[3]


# Cleaning on Spark ------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(
    ("policy", "retained", "versions_left"),
    [
        ("KEEP_LATEST_COMMITS", 2, 3),  # the 2 retained commits + the version a query at u3 reads
        ("KEEP_LATEST_FILE_VERSIONS", 2, 2),
        ("KEEP_LATEST_FILE_VERSIONS", 1, 1),
    ],
)
def test_cow_clean_keeps_what_the_policy_promises(
    spark: Any, tmp_path: Path, policy: str, retained: int, versions_left: int, table_version: int
) -> None:
    base = cow_with_versions(tmp_path, upserts=4, table_version=table_version)
    table = HudiTable.open(base)
    commits = [i.requested_time for i in table.timeline().commits()]
    latest_slices = oracle.file_slices(base)
    assert {len(v) for v in slices_on_disk(base).values()} == {1, 5}

    instant, paths = clean_and_check(spark, base, policy=policy, retained=retained)

    left = slices_on_disk(base)
    for (partition, _), instants in left.items():
        expected = 1 if partition == "la" else versions_left
        assert len(instants) == expected
        assert max(instants) == commits[-1] or partition == "la"
    assert len(paths) == 4 * (5 - versions_left)
    # what the oracle reads is the latest slice of each group, all still on disk
    assert oracle.file_slices(base) == latest_slices

    plan = avro_codec.decode(Path(timeline_dir(base), f"{instant}.clean.requested").read_bytes())
    assert plan["version"] == 2 and plan["policy"] == policy
    assert plan["lastCompletedCommitTimestamp"] == commits[-1]
    assert all(p.startswith(base + "/") for p in paths)
    if policy == "KEEP_LATEST_COMMITS":
        assert plan["earliestInstantToRetain"] == {
            "timestamp": commits[3],
            "action": "commit",
            "state": "COMPLETED",
        }
    else:
        assert plan["earliestInstantToRetain"] is None
    inflight = Path(timeline_dir(base), f"{instant}.clean.inflight").read_bytes()
    assert avro_codec.decode(inflight) == plan

    timeline = table.timeline()
    clean = timeline.get(instant)
    assert clean is not None and clean.is_completed
    metadata = timeline.clean_metadata(clean)
    assert metadata["version"] == 2 and metadata["totalFilesDeleted"] == len(paths)
    assert metadata["startCleanTime"] == instant
    deleted = sorted(
        f"{base}/{partition}/{name}"
        for partition, meta in metadata["partitionMetadata"].items()
        for name in meta["successDeleteFiles"]
    )
    assert deleted == paths
    assert all(not m["failedDeleteFiles"] for m in metadata["partitionMetadata"].values())
    assert {m["policy"] for m in metadata["partitionMetadata"].values()} == {policy}
    assert schedule_clean(HudiTable.open(base), policy=policy, retained=retained) is None


def compact(table: HudiTable) -> str:
    """A completed compaction of every slice with log files, written as Hudi writes one."""
    storage, config = table.storage, table.config
    timeline = table.timeline()
    slices = [s for s in table.file_system_view(timeline).latest_file_slices() if s.log_files]
    ts = new_instant_time(timeline.instants)
    operations = [
        {
            "baseInstantTime": s.base_instant_time,
            "deltaFilePaths": [log.file_name for log in s.log_files],
            "dataFilePath": s.base_file.file_name if s.base_file else None,
            "fileId": s.file_id,
            "partitionPath": s.partition_path,
        }
        for s in slices
    ]
    plan = avro_codec.encode("HoodieCompactionPlan", {"operations": operations, "version": 2})
    inflight = transition(
        storage, config, request(storage, config, ts, Action.COMPACTION, plan), State.INFLIGHT
    )
    metadata = CommitMetadata(
        compacted=True,
        operation_type="COMPACT",
        extra_metadata={"schema": timeline.latest_schema() or ""},
    )
    for piece in slices:
        rows, _ = read_file_slice(storage, piece, "ts", timeline.is_completed)
        name = BaseFileName(piece.file_id, TOKEN, ts)
        path = f"{piece.partition_path}/{name}" if piece.partition_path else str(name)
        rows = rows.set_column(4, FILE_NAME, pa.array([str(name)] * rows.num_rows))
        size = write_base_file(storage, path, rows)
        stat = WriteStat(
            file_id=piece.file_id,
            path=path,
            prev_commit=piece.base_instant_time,
            partition_path=piece.partition_path,
            num_writes=rows.num_rows,
            total_write_bytes=size,
            file_size_in_bytes=size,
        )
        metadata.add_write_stat(piece.partition_path, stat)
    transition(storage, config, inflight, State.COMPLETED, metadata)
    return ts


def mor_with_compactions(tmp_path: Path, table_version: int = 6) -> str:
    """Two file groups, each: slice 1 (base + 2 logs), slice 2 (compacted base + 2 logs),
    slice 3 (compacted base + 1 log)."""
    base, writer = new_table(
        tmp_path, MERGE_ON_READ, partitioned=False, table_version=table_version
    )
    writer.max_file_rows = 10
    writer.insert(batch(range(20), ts=1))
    ts = 10
    for _ in range(2):
        for _ in range(2):
            writer.upsert(batch(range(0, 20, 2), ts=ts))
            ts += 1
        compact(writer.table)
    writer.upsert(batch(range(1, 20, 2), ts=ts))
    return base


@pytest.mark.spark
def test_mor_clean_deletes_old_slices_with_their_log_files(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base = mor_with_compactions(tmp_path, table_version)
    table = HudiTable.open(base)
    before = slices_on_disk(base)
    assert len(before) == 2 and {len(v) for v in before.values()} == {3}
    commits = [i.requested_time for i in table.timeline().commits()]  # i d d C d d C d

    _, paths = clean_and_check(spark, base, policy="KEEP_LATEST_COMMITS", retained=2)

    # the earliest retained commit is the second compaction, where slice 3 starts: slice 2
    # (what a query just before it merges) stays, slice 1 goes with its log files
    assert {tuple(sorted(v)) for v in slices_on_disk(base).values()} == {(commits[3], commits[6])}
    names = sorted(Path(p).name for p in paths)
    assert len(names) == 2 * 3  # a base file and its two log files per group
    assert sum(1 for n in names if LogFileName.parse(n)) == 4


def append_to_pending_compaction(table: HudiTable, piece: FileSlice, compaction: str) -> None:
    """A delta commit writing a log file of the new slice a pending compaction starts."""
    storage, config = table.storage, table.config
    timeline = table.timeline()
    ts = new_instant_time(timeline.instants)
    inflight = transition(
        storage, config, request(storage, config, ts, Action.DELTA_COMMIT), State.INFLIGHT
    )
    rows, _ = read_file_slice(storage, piece, "ts", timeline.is_completed)
    rows = rows.slice(0, 2)
    rows = rows.set_column(0, COMMIT_TIME, pa.array([ts] * 2))
    rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", pc.add(rows["ts"], 100))
    # layout 1 names it by the compaction (its slice's base), layout 2 by the delta commit
    name = LogFileName(
        piece.file_id, TimelineLayout.of(config).log_file_instant(compaction, ts), 1, TOKEN
    )
    schema = avro_record_schema(config.table_name, rows.schema)
    size = write_log_file(storage, str(name), ts, schema, records=rows)
    metadata = CommitMetadata(
        operation_type="UPSERT", extra_metadata={"schema": json.dumps(schema)}
    )
    stat = WriteStat(
        file_id=piece.file_id,
        path=str(name),
        prev_commit=compaction,
        partition_path="",
        num_writes=2,
        num_update_writes=2,
        total_write_bytes=size,
        file_size_in_bytes=size,
        log_version=1,
        log_offset=0,
        base_file="",
        log_files=[str(name)],
    )
    metadata.add_write_stat("", stat)
    transition(storage, config, inflight, State.COMPLETED, metadata)


@pytest.mark.spark
def test_slices_a_pending_compaction_reads_survive(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base = mor_with_compactions(tmp_path, table_version)
    table = HudiTable.open(base)
    group = table.file_system_view().file_groups[0]
    target = group.latest_slice  # compacted base + 1 log: the input of the pending compaction
    pending = new_instant_time(table.timeline().instants)
    operation = {
        "baseInstantTime": target.base_instant_time,
        "deltaFilePaths": [log.file_name for log in target.log_files],
        "dataFilePath": target.base_file.file_name if target.base_file else None,
        "fileId": target.file_id,
        "partitionPath": "",
    }
    plan = avro_codec.encode("HoodieCompactionPlan", {"operations": [operation], "version": 2})
    request(table.storage, table.config, pending, Action.COMPACTION, plan)
    append_to_pending_compaction(table, target, pending)  # the group's latest slice: log-only

    # one version per group is all the policy keeps, but the compaction still reads `target`
    _, paths = clean_and_check(spark, base, policy="KEEP_LATEST_FILE_VERSIONS", retained=1)

    left = slices_on_disk(base)
    assert left[("", group.file_id)] == {target.base_instant_time, pending}
    assert all(Path(base, p).is_file() for p in target.paths)
    other = [key for key in left if key[1] != group.file_id]
    assert [len(left[key]) for key in other] == [1]
    assert not {Path(p).name for p in paths} & {Path(p).name for p in target.paths}


def write_savepoint(table: HudiTable, commit: str, files: dict[str, list[str]]) -> None:
    """A completed savepoint of `commit` (Hudi gives it the commit's instant time)."""
    metadata = {
        "savepointedBy": "test",
        "savepointedAt": 0,
        "comments": "",
        "partitionMetadata": {
            p: {"partitionPath": p, "savepointDataFile": names} for p, names in files.items()
        },
    }
    inflight = Instant(commit, Action.SAVEPOINT, State.INFLIGHT)
    table.storage.write_bytes(TimelineLayout.of(table.config).path(inflight), b"")
    content = avro_codec.encode("HoodieSavepointMetadata", metadata)
    transition(table.storage, table.config, inflight, State.COMPLETED, content)


def write_pending_clustering(table: HudiTable, piece: FileSlice) -> str:
    ts = new_instant_time(table.timeline().instants)
    slice_info: dict[str, Any] = {
        "dataFilePath": piece.base_file.path if piece.base_file else None,
        "deltaFilePaths": [],
        "fileId": piece.file_id,
        "partitionPath": piece.partition_path,
    }
    requested = {
        "operationType": "CLUSTER",
        "clusteringPlan": {"inputGroups": [{"slices": [slice_info], "numOutputFileGroups": 1}]},
    }
    content = avro_codec.encode("HoodieRequestedReplaceMetadata", requested)
    action = TimelineLayout.of(table.config).clustering_action
    request(table.storage, table.config, ts, action, content)
    return ts


@pytest.mark.spark
def test_savepointed_files_and_pending_clustering_groups_survive(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base = cow_with_versions(tmp_path, upserts=3, table_version=table_version)
    table = HudiTable.open(base)
    groups = [g for g in table.file_system_view().file_groups if g.partition_path == "sf"]
    saved, clustered = groups
    first = saved.slices[0]
    assert first.base_file is not None
    write_savepoint(table, first.base_instant_time, {"sf": [first.base_file.file_name]})
    write_pending_clustering(table, clustered.latest_slice)

    clean_and_check(spark, base, policy="KEEP_LATEST_FILE_VERSIONS", retained=1)

    left = slices_on_disk(base)
    assert left[("sf", saved.file_id)] == {
        first.base_instant_time,
        saved.latest_slice.base_instant_time,
    }
    assert left[("sf", clustered.file_id)] == {s.base_instant_time for s in clustered.slices}
    assert {len(v) for k, v in left.items() if k[0] != "sf"} == {1}
    plan = table.timeline().avro_details(
        table.timeline().completed((Action.CLEAN,))[0], State.REQUESTED
    )
    assert plan is not None
    assert plan["extraMetadata"] == {"savepointed_timestamps": first.base_instant_time}


def replace_file_group(table: HudiTable, piece: FileSlice) -> tuple[str, str]:
    """An insert-overwrite style replacecommit: the slice's rows move to a new file group."""
    assert piece.base_file is not None
    storage, config = table.storage, table.config
    timeline = table.timeline()
    ts = new_instant_time(timeline.instants)
    requested = avro_codec.encode(
        "HoodieRequestedReplaceMetadata", {"operationType": "INSERT_OVERWRITE"}
    )
    inflight = transition(
        storage,
        config,
        request(storage, config, ts, Action.REPLACE_COMMIT, requested),
        State.INFLIGHT,
    )
    file_id = new_file_id()
    name = BaseFileName(file_id, TOKEN, ts)
    path = f"{piece.partition_path}/{name}"
    rows = read_base_file(storage, piece.base_file.path)
    rows = rows.set_column(4, FILE_NAME, pa.array([str(name)] * rows.num_rows))
    size = write_base_file(storage, path, rows)
    metadata = ReplaceCommitMetadata(
        operation_type="INSERT_OVERWRITE",
        extra_metadata={"schema": timeline.latest_schema() or ""},
        partition_to_replace_file_ids={piece.partition_path: [piece.file_id]},
    )
    stat = WriteStat(
        file_id=file_id,
        path=path,
        prev_commit="null",
        partition_path=piece.partition_path,
        num_writes=rows.num_rows,
        num_inserts=rows.num_rows,
        total_write_bytes=size,
        file_size_in_bytes=size,
    )
    metadata.add_write_stat(piece.partition_path, stat)
    transition(storage, config, inflight, State.COMPLETED, metadata)
    return ts, file_id


@pytest.mark.spark
def test_replaced_file_groups_go_once_older_than_the_retained_commits(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base = cow_with_versions(tmp_path, upserts=1, table_version=table_version)  # i u1
    table = HudiTable.open(base)
    replaced = next(g for g in table.file_system_view().file_groups if g.partition_path == "la")
    replace_time, new_group = replace_file_group(table, replaced.latest_slice)  # i u1 R
    HudiWriter(table, max_file_rows=5).upsert(batch(range(0, 30, 3), ts=50))  # i u1 R u2

    # earliest retained = R: the replaced group is not older than it, so it stays
    _, first = clean_and_check(spark, base, policy="KEEP_LATEST_COMMITS", retained=2)
    assert not [p for p in first if replaced.file_id in p]
    assert ("la", replaced.file_id) in slices_on_disk(base)

    HudiWriter(table, max_file_rows=5).upsert(batch(range(0, 30, 3), ts=60))  # … R u2 u3
    _, second = clean_and_check(spark, base, policy="KEEP_LATEST_COMMITS", retained=2)
    assert sorted(Path(p).name for p in second if replaced.file_id in p) == sorted(
        Path(p).name for p in replaced.latest_slice.paths
    )
    left = slices_on_disk(base)
    assert ("la", replaced.file_id) not in left
    assert left[("la", new_group)] == {replace_time}


@pytest.mark.spark
def test_rerun_after_a_crash_mid_clean_completes(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base = cow_with_versions(tmp_path, upserts=3, table_version=table_version)
    table = HudiTable.open(base)
    before = read_state(base)
    instant = schedule_clean(table, policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert instant is not None
    paths = planned_paths(table, instant)
    # the crashed attempt: inflight written, some files deleted, then killed
    requested = Path(timeline_dir(base), f"{instant}.clean.requested")
    Path(timeline_dir(base), f"{instant}.clean.inflight").write_bytes(requested.read_bytes())
    for path in paths[::2]:
        Path(path).unlink()
    assert schedule_clean(table, policy="KEEP_LATEST_FILE_VERSIONS", retained=1) == instant

    heartbeat.beat(table.storage, instant)  # a job that beat a moment ago is still alive
    with pytest.raises(InstantInFlightError):
        execute_clean(spark, table, instant, heartbeat_interval=30)
    long_ago = time.time() - 600  # its heartbeat stopped: the job is dead
    os.utime(Path(base, heartbeat.heartbeat_path(instant)), (long_ago, long_ago))
    result = execute_clean(spark, table, instant, heartbeat_interval=30)

    assert result.files_deleted == len(paths)
    assert not any(Path(p).exists() for p in paths)
    metadata = table.timeline().clean_metadata(Instant(instant, Action.CLEAN, State.COMPLETED))
    assert metadata["totalFilesDeleted"] == len(paths)
    after = read_state(base)
    assert after[0].equals(before[0]) and after[1:] == before[1:]
    with pytest.raises(PlanNotFoundError, match="already completed"):
        execute_clean(spark, table, instant)


@pytest.mark.spark
@pytest.mark.parametrize("version", [1, 2])
def test_executes_a_plan_hudi_wrote(
    spark: Any, tmp_path: Path, version: int, table_version: int
) -> None:
    """Hudi's plans name files by Hadoop URI (version 2) or by name (version 1)."""
    base = cow_with_versions(tmp_path, upserts=2, table_version=table_version)
    table = HudiTable.open(base)
    old = [s for g in table.file_system_view().file_groups for s in g.slices[:-1]]
    by_partition: dict[str, list[str]] = defaultdict(list)
    for piece in old:
        by_partition[piece.partition_path] += piece.paths
    plan: dict[str, Any] = {"policy": "KEEP_LATEST_FILE_VERSIONS", "version": version}
    if version == 1:
        plan["filesToBeDeletedPerPartition"] = {
            p: [Path(f).name for f in files] for p, files in by_partition.items()
        }
    else:
        plan["filesToBeDeletedPerPartition"] = {}
        plan["filePathsToBeDeletedPerPartition"] = {
            p: [{"filePath": f"file:{base}/{f}", "isBootstrapBaseFile": False} for f in files]
            for p, files in by_partition.items()
        }
    instant = new_instant_time(table.timeline().instants)
    content = avro_codec.encode("HoodieCleanerPlan", plan)
    request(table.storage, table.config, instant, Action.CLEAN, content)
    before = read_state(base)

    result = execute_clean(spark, table, instant)

    assert result.files_deleted == sum(len(f) for f in by_partition.values()) == 8
    assert {len(v) for v in slices_on_disk(base).values()} == {1}
    after = read_state(base)
    assert after[0].equals(before[0]) and after[1:] == before[1:]
    metadata = table.timeline().clean_metadata(Instant(instant, Action.CLEAN, State.COMPLETED))
    assert metadata["earliestCommitToRetain"] == ""
    assert sorted(metadata["partitionMetadata"]) == ["nyc", "sf"]


def test_commits_retained_count_in_requested_order_on_layout_2(tmp_path: Path) -> None:
    """Hudi 1.x's cleaner counts the last commits by requested time, as its timeline orders
    them, even when a later-requested commit completed first (concurrent writers)."""
    base = str(tmp_path / "t")
    create_table(base, "t", record_key_fields=["id"], ordering_field="ts", table_version=9)
    folder = timeline_dir(base)
    times = {"a": ("20240101000001000", "20240101000004000")}  # requested, completed
    times["b"] = ("20240101000002000", "20240101000003000")  # completed before a
    times["c"] = ("20240101000005000", "20240101000006000")
    for requested, completed in times.values():
        (folder / f"{requested}.commit.requested").write_bytes(b"")
        (folder / f"{requested}.inflight").write_bytes(b"")
        (folder / f"{requested}_{completed}.commit").write_bytes(
            CommitMetadata(operation_type="UPSERT").to_avro_bytes()
        )

    earliest = earliest_commit_to_retain(HudiTable.open(base).timeline(), 2)

    assert earliest is not None and earliest.requested_time == times["b"][0]
