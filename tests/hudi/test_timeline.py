"""The timeline in layout 1: writer-made instants plus hand-written service instants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests import oracle

from tms.hudi.avro import codec as avro_codec
from tms.hudi.avro.commit_metadata import CommitMetadata, ReplaceCommitMetadata
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, Instant, State
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS, Timeline
from tms.hudi.timeline.transitions import new_instant_time
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

CLUSTERING_STRATEGY = (
    "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
)


# Helpers shared with the other timeline, view and refusal tests ---------------------------


def rows(ids: range | list[int], ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": pa.array([["sf", "nyc", "la"][i % 3] for i in ids]),
            "fare": pa.array([float(i) for i in ids]),
        }
    )


def new_table(
    base: str,
    table_type: str = MERGE_ON_READ,
    partitioned: bool = False,
    name: str = "trips",
    table_version: int = 6,
) -> HudiWriter:
    table = create_table(
        base,
        name,
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"] if partitioned else [],
        table_version=table_version,
    )
    return HudiWriter(table, max_file_rows=40)


def write(writer: HudiWriter, operation: str, ids: range | list[int], ts: int) -> str:
    """One writer commit on a freshly opened table (so it sees hand-made instants)."""
    fresh = HudiWriter.open(writer.table.base_path, writer.max_file_rows)
    batch = rows(ids, ts)
    if operation == "insert":
        return fresh.insert(batch)
    if operation == "delete":
        return fresh.delete(batch.select(["id", "city"]))
    return fresh.upsert(batch)


def timeline(base: str) -> Timeline:
    return HudiTable.open(base).timeline()


def since(got: Timeline, last: Instant | None, actions: tuple[Action, ...]) -> list[str]:
    """Completed instants of `actions` after `last`: what a trigger counts since a service."""
    return [i.requested_time for i in got.completed_after(last, actions)]


def next_time(base: str) -> str:
    return new_instant_time(timeline(base).instants)


def put(base: str, name: str, content: bytes = b"") -> None:
    """An instant file written by hand into the layout 1 timeline folder."""
    path = Path(base) / ".hoodie" / name
    path.write_bytes(content)


def compaction_plan(base: str) -> dict[str, Any]:
    """A plan compacting every latest slice that has log files."""
    view = HudiTable.open(base).file_system_view()
    return {
        "operations": [
            {
                "baseInstantTime": s.base_instant_time,
                "fileId": s.file_id,
                "partitionPath": s.partition_path,
                "dataFilePath": s.base_file.file_name if s.base_file else None,
                "deltaFilePaths": [log.file_name for log in s.log_files],
                "metrics": {"TOTAL_LOG_FILES": float(len(s.log_files))},
            }
            for s in view.latest_file_slices()
            if s.log_files
        ],
        "version": 2,
    }


def request_compaction(base: str, plan: dict[str, Any] | None = None) -> str:
    ts = next_time(base)
    put(base, f"{ts}.compaction.requested", avro_codec.encode("HoodieCompactionPlan", plan or {}))
    return ts


def complete_compaction(base: str, ts: str) -> None:
    """Mark a requested compaction completed (its new base files are not written here)."""
    put(base, f"{ts}.compaction.inflight")
    metadata = CommitMetadata(compacted=True, operation_type="COMPACT")
    put(base, f"{ts}.commit", metadata.to_json())


def cleaner_plan(retain: str, last: str) -> dict[str, Any]:
    return {
        "earliestInstantToRetain": {"timestamp": retain, "action": "commit", "state": "COMPLETED"},
        "lastCompletedCommitTimestamp": last,
        "policy": "KEEP_LATEST_COMMITS",
        "filePathsToBeDeletedPerPartition": {
            "sf": [
                {"filePath": "sf/f1_0-1-0_20240101000000000.parquet", "isBootstrapBaseFile": False}
            ]
        },
        "version": 2,
    }


def clean_metadata(ts: str, retain: str, last: str) -> dict[str, Any]:
    return {
        "startCleanTime": ts,
        "timeTakenInMillis": 12,
        "totalFilesDeleted": 1,
        "earliestCommitToRetain": retain,
        "lastCompletedCommitTimestamp": last,
        "partitionMetadata": {
            "sf": {
                "partitionPath": "sf",
                "policy": "KEEP_LATEST_COMMITS",
                "deletePathPatterns": ["f1_0-1-0_20240101000000000.parquet"],
                "successDeleteFiles": ["f1_0-1-0_20240101000000000.parquet"],
                "failedDeleteFiles": [],
            }
        },
        "version": 2,
    }


def complete_clean(base: str, retain: str, last: str) -> str:
    ts = next_time(base)
    plan = avro_codec.encode("HoodieCleanerPlan", cleaner_plan(retain, last))
    put(base, f"{ts}.clean.requested", plan)
    put(base, f"{ts}.clean.inflight", plan)
    put(
        base,
        f"{ts}.clean",
        avro_codec.encode("HoodieCleanMetadata", clean_metadata(ts, retain, last)),
    )
    return ts


def clustering_request(base: str) -> bytes:
    """Requested replace metadata clustering every latest slice into one file group."""
    view = HudiTable.open(base).file_system_view()
    slices = [
        {
            "dataFilePath": s.base_file.path if s.base_file else None,
            "deltaFilePaths": [log.path for log in s.log_files],
            "fileId": s.file_id,
            "partitionPath": s.partition_path,
        }
        for s in view.latest_file_slices()
    ]
    return avro_codec.encode(
        "HoodieRequestedReplaceMetadata",
        {
            "operationType": "CLUSTER",
            "clusteringPlan": {
                "inputGroups": [{"slices": slices, "numOutputFileGroups": 1}],
                "strategy": {"strategyClassName": CLUSTERING_STRATEGY},
            },
        },
    )


def request_clustering(base: str, complete: bool = False) -> str:
    ts = next_time(base)
    put(base, f"{ts}.replacecommit.requested", clustering_request(base))
    if complete:
        put(base, f"{ts}.replacecommit.inflight")
        put(base, f"{ts}.replacecommit", ReplaceCommitMetadata(operation_type="CLUSTER").to_json())
    return ts


def oracle_commits(base: str) -> list[tuple[str, str]]:
    return oracle.completed_instants(base)


def our_commits(base: str) -> list[tuple[str, str]]:
    return [(i.requested_time, i.action.value) for i in timeline(base).commits()]


# Tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("table_version", [6, 9])
@pytest.mark.parametrize(
    ("table_type", "action"),
    [(COPY_ON_WRITE, Action.COMMIT), (MERGE_ON_READ, Action.DELTA_COMMIT)],
)
def test_writer_instants_are_completed_commits(
    tmp_path: Path, table_type: str, action: Action, table_version: int
) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, table_type, partitioned=True, table_version=table_version)
    written = [
        write(writer, "insert", range(50), 1),
        write(writer, "upsert", range(0, 50, 3), 2),
        write(writer, "delete", [1, 2], 3),
    ]
    got = timeline(base)
    assert [(i.requested_time, i.action, i.state) for i in got.instants] == [
        (ts, action, State.COMPLETED) for ts in written
    ]
    assert got.pending() == []
    assert all(got.origin_action(i) is action for i in got.instants)
    assert our_commits(base) == oracle_commits(base)
    assert sum(s.num_writes for s in got.commit_metadata(got.instants[0]).write_stats()) == 50
    if table_version >= 8:  # layout 2 names each completed instant by its completion time
        times = [t for i in got.instants for t in (i.requested_time, i.completion_time)]
        assert None not in times and times == sorted(times) and len(set(times)) == len(times)


def test_requested_and_inflight_instants_are_pending(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, COPY_ON_WRITE)
    done = write(writer, "insert", range(10), 1)
    requested = next_time(base)
    put(base, f"{requested}.commit.requested")
    inflight = next_time(base)
    put(base, f"{inflight}.commit.requested")
    put(base, f"{inflight}.inflight")  # a plain commit's inflight file has no action in its name
    rollback = next_time(base)
    put(base, f"{rollback}.rollback.requested")
    put(base, f"{rollback}.rollback.inflight")
    savepoint = next_time(base)
    put(base, f"{savepoint}.savepoint.inflight")
    clean = next_time(base)
    put(
        base,
        f"{clean}.clean.requested",
        avro_codec.encode("HoodieCleanerPlan", cleaner_plan(done, done)),
    )
    for stray in ("hoodie.properties.backup", f".{done}.commit.crc", f"{done}.commit.1a2b.tmp"):
        put(base, stray)
    (Path(base) / ".hoodie" / "archived" / f"{done}.commit").write_bytes(b"")

    got = timeline(base)
    assert [(i.requested_time, i.action, i.state) for i in got.instants] == [
        (done, Action.COMMIT, State.COMPLETED),
        (requested, Action.COMMIT, State.REQUESTED),
        (inflight, Action.COMMIT, State.INFLIGHT),
        (rollback, Action.ROLLBACK, State.INFLIGHT),
        (savepoint, Action.SAVEPOINT, State.INFLIGHT),
        (clean, Action.CLEAN, State.REQUESTED),
    ]
    assert [i.requested_time for i in got.pending()] == [
        requested,
        inflight,
        rollback,
        savepoint,
        clean,
    ]
    assert got.completed() == [got.instants[0]]
    assert not got.is_completed(inflight) and got.is_completed(done)
    assert got.last_clean() is None
    rows_ = got.describe()
    assert [(r["instant"], r["action"], r["state"]) for r in rows_][2] == (
        inflight,
        "commit",
        "INFLIGHT",
    )
    assert our_commits(base) == oracle_commits(base) == [(done, "commit")]


def test_completed_compaction_is_a_commit_requested_as_compaction(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, MERGE_ON_READ)
    write(writer, "insert", range(30), 1)
    write(writer, "upsert", range(0, 30, 2), 2)
    plan = compaction_plan(base)
    assert plan["operations"], "the upsert left log files to compact"
    done = request_compaction(base, plan)
    complete_compaction(base, done)
    pending = request_compaction(base, plan)
    put(base, f"{pending}.compaction.inflight")

    got = timeline(base)
    compaction = got.get(done)
    assert compaction is not None
    assert (compaction.action, compaction.state) == (Action.COMMIT, State.COMPLETED)
    assert got.origin_action(compaction) is Action.COMPACTION
    assert got.is_compaction(compaction)
    assert got.last_compaction() == compaction
    assert got.commit_metadata(compaction).compacted
    decoded = got.compaction_plan(compaction)
    assert [op["fileId"] for op in decoded["operations"]] == [
        op["fileId"] for op in plan["operations"]
    ]
    assert decoded["operations"][0]["deltaFilePaths"] == plan["operations"][0]["deltaFilePaths"]
    assert decoded["operations"][0]["metrics"] == {"TOTAL_LOG_FILES": 1.0}

    still_pending = got.get(pending)
    assert still_pending is not None
    assert (still_pending.action, still_pending.state) == (Action.COMPACTION, State.INFLIGHT)
    assert got.pending_compactions() == [still_pending]
    assert got.compaction_plan(still_pending)["operations"] == decoded["operations"]
    row = next(r for r in got.describe() if r["instant"] == done)
    assert (row["action"], row["state"], row["requested_as"]) == (
        "commit",
        "COMPLETED",
        "compaction",
    )
    # the oracle sees the compaction as a completed commit too
    assert our_commits(base) == oracle_commits(base)


def test_commits_since_the_last_compaction_clean_and_clustering(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, MERGE_ON_READ, partitioned=True)
    d1 = write(writer, "insert", range(60), 1)
    d2 = write(writer, "upsert", range(0, 60, 2), 2)

    fresh = timeline(base)
    assert since(fresh, fresh.last_compaction(), (Action.DELTA_COMMIT,)) == [d1, d2]
    assert since(fresh, fresh.last_clean(), WRITE_COMMIT_ACTIONS) == [d1, d2]
    assert since(fresh, fresh.last_clustering(), WRITE_COMMIT_ACTIONS) == [d1, d2]
    assert fresh.last_compaction() is None and fresh.last_clean() is None
    assert fresh.last_clustering() is None

    c3 = request_compaction(base, compaction_plan(base))
    complete_compaction(base, c3)
    d4 = write(writer, "upsert", range(1, 60, 5), 4)
    cl5 = complete_clean(base, retain=d2, last=d4)
    d6 = write(writer, "upsert", range(0, 60, 7), 6)
    r7 = request_clustering(base, complete=True)
    d8 = write(writer, "upsert", range(3, 60, 9), 8)
    pending_compaction = request_compaction(base, compaction_plan(base))
    pending_clean = next_time(base)
    put(base, f"{pending_clean}.clean.requested")

    got = timeline(base)
    assert since(got, got.last_compaction(), (Action.DELTA_COMMIT,)) == [d4, d6, d8]
    assert since(got, got.last_clean(), WRITE_COMMIT_ACTIONS) == [d6, r7, d8]
    assert since(got, got.last_clustering(), WRITE_COMMIT_ACTIONS) == [d8]
    last = (got.last_compaction(), got.last_clean(), got.last_clustering())
    assert [i.requested_time if i else None for i in last] == [c3, cl5, r7]
    assert [i.requested_time for i in got.pending_compactions()] == [pending_compaction]
    assert [i.requested_time for i in got.pending()] == [pending_compaction, pending_clean]
    assert our_commits(base) == oracle_commits(base)


def test_pending_replacecommit_is_clustering_only_when_its_plan_says_cluster(
    tmp_path: Path,
) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, COPY_ON_WRITE, partitioned=True)
    write(writer, "insert", range(30), 1)
    clustering = request_clustering(base)
    overwrite = next_time(base)
    put(
        base,
        f"{overwrite}.replacecommit.requested",
        avro_codec.encode("HoodieRequestedReplaceMetadata", {"operationType": "INSERT_OVERWRITE"}),
    )
    put(
        base,
        f"{overwrite}.replacecommit.inflight",
        CommitMetadata(operation_type="INSERT_OVERWRITE").to_json(),
    )
    legacy_overwrite = next_time(base)
    put(base, f"{legacy_overwrite}.replacecommit.requested")  # older writers leave it empty
    inflight_clustering = request_clustering(base)
    put(base, f"{inflight_clustering}.replacecommit.inflight")

    got = timeline(base)
    by_time = {i.requested_time: i for i in got.instants}
    assert all(i.action is Action.REPLACE_COMMIT for i in got.pending())
    assert [i.requested_time for i in got.pending_clusterings()] == [
        clustering,
        inflight_clustering,
    ]
    assert got.is_clustering(by_time[clustering])
    assert not got.is_clustering(by_time[overwrite])
    assert not got.is_clustering(by_time[legacy_overwrite])
    plan = got.clustering_plan(by_time[inflight_clustering])
    assert plan["strategy"]["strategyClassName"] == CLUSTERING_STRATEGY
    slices = plan["inputGroups"][0]["slices"]
    assert sorted(s["partitionPath"] for s in slices) == ["la", "nyc", "sf"]
    assert all(s["dataFilePath"].startswith(s["partitionPath"] + "/") for s in slices)
    with pytest.raises(ValueError, match="no clustering plan"):
        got.clustering_plan(by_time[overwrite])

    # Completed, the clustering counts as the last clustering; an insert overwrite does not.
    put(base, f"{clustering}.replacecommit.inflight")
    put(
        base,
        f"{clustering}.replacecommit",
        ReplaceCommitMetadata(operation_type="CLUSTER").to_json(),
    )
    put(
        base,
        f"{overwrite}.replacecommit",
        ReplaceCommitMetadata(operation_type="INSERT_OVERWRITE").to_json(),
    )
    got = timeline(base)
    assert got.last_clustering() == got.get(clustering)
    assert [i.requested_time for i in got.pending_clusterings()] == [inflight_clustering]
    assert since(got, got.last_clustering(), WRITE_COMMIT_ACTIONS) == [overwrite]


def test_cleaner_plan_and_clean_metadata_are_decoded(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, COPY_ON_WRITE)
    first = write(writer, "insert", range(10), 1)
    second = write(writer, "upsert", range(5), 2)
    clean = complete_clean(base, retain=second, last=second)

    got = timeline(base)
    instant = got.last_clean()
    assert instant is not None and instant.requested_time == clean
    plan = got.avro_details(instant, State.REQUESTED)
    assert plan is not None
    assert plan["policy"] == "KEEP_LATEST_COMMITS"
    assert plan["earliestInstantToRetain"] == {
        "timestamp": second,
        "action": "commit",
        "state": "COMPLETED",
    }
    assert plan["filePathsToBeDeletedPerPartition"]["sf"][0]["filePath"].startswith("sf/f1_")
    metadata = got.clean_metadata(instant)
    assert metadata["totalFilesDeleted"] == 1
    assert metadata["earliestCommitToRetain"] == second
    assert metadata["partitionMetadata"]["sf"]["successDeleteFiles"] == [
        "f1_0-1-0_20240101000000000.parquet"
    ]
    assert since(got, got.last_clean(), WRITE_COMMIT_ACTIONS) == []
    assert [i.requested_time for i in got.commits()] == [first, second]


def test_a_savepoint_shares_its_commit_time_without_hiding_the_commit(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    table = create_table(base, "t", record_key_fields=["id"], ordering_field="ts")
    instant = HudiWriter(table).insert(pa.table({"id": ["a"], "ts": pa.array([1], pa.int64())}))
    hoodie = tmp_path / "t" / ".hoodie"
    savepoint = avro_codec.encode(
        "HoodieSavepointMetadata",
        {"savepointedBy": "ops", "savepointedAt": 1, "comments": "", "partitionMetadata": {}},
    )
    (hoodie / f"{instant}.savepoint.inflight").write_bytes(b"")
    (hoodie / f"{instant}.savepoint").write_bytes(savepoint)
    timeline = HudiTable.open(base).timeline()
    assert [i.requested_time for i in timeline.commits()] == [instant]
    assert [i.requested_time for i in timeline.completed((Action.SAVEPOINT,))] == [instant]
    assert timeline.get(instant) is not None and timeline.get(instant).action is Action.DELTA_COMMIT
    assert timeline.commit_metadata(timeline.commits()[0]).operation_type == "INSERT"


def test_an_instant_time_reads_back_as_the_moment_it_formats() -> None:
    from datetime import UTC, datetime

    import pytest

    from tms.hudi.timeline.instant import format_instant_time, parse_instant_time

    moment = datetime(2024, 2, 29, 23, 59, 58, 123000, tzinfo=UTC)
    assert parse_instant_time(format_instant_time(moment)) == moment
    assert parse_instant_time("20240229235958") == moment.replace(microsecond=0)
    for bad in ("2024022923595", "20240229235958x", "2024-02-29"):
        with pytest.raises(ValueError, match="not an instant time"):
            parse_instant_time(bad)
