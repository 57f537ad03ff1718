"""Every DTO field name as Hudi's `@JsonProperty` names it (`org.apache.hudi.common.table.
timeline.dto`), and the answers' shapes (lists, nesting, nulls) the Java client parses."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from tests.hudi.test_fixture_views import drop_instant, instant_times, unzip_fixture
from tests.view.conftest import Register, own_table
from tests.view.java_client import JavaViewClient
from tms.hudi.table import HudiTable

# Hudi's DTO classes, their @JsonProperty names.
FILE_SLICE_DTO = {"baseFile", "logFiles", "partition", "fileId", "baseInstant"}
BASE_FILE_DTO = {"fileStatus", "fullPath", "fileLen", "commitTime", "fileId", "bootstrapBaseFile"}
LOG_FILE_DTO = {"fileStatus", "path", "len"}
FILE_STATUS_DTO_1X = {
    "path",
    "length",
    "isdir",
    "blockReplication",
    "blocksize",
    "modificationTime",
}
FILE_STATUS_DTO_0X = FILE_STATUS_DTO_1X | {"accessTime", "permission", "owner", "group", "symlink"}
FILE_PATH_DTO = {"uri"}
FILE_GROUP_DTO = {"partition", "fileId", "slices", "timeline"}
TIMELINE_DTO = {"instants"}
INSTANT_DTO = {"action", "ts", "state", "requestedTime", "completionTime"}
"""Hudi 1.x's `InstantDTO` (0.x's has the first three and ignores the others)."""
COMPACTION_OP_DTO = {
    "baseInstant", "compactionInstant", "dataFileInstant", "deltaFiles", "baseFile", "id",
    "partition", "metrics", "externalBaseFile",
}  # fmt: skip
CLUSTERING_OP_DTO = {"id", "partition", "instantTime", "instantState", "instantAction"}


def check_base_file(dto: dict, base_path: str) -> None:
    assert set(dto) == BASE_FILE_DTO
    assert set(dto["fileStatus"]) == FILE_STATUS_DTO_0X
    assert set(dto["fileStatus"]["path"]) == FILE_PATH_DTO
    assert dto["fullPath"].startswith(base_path + "/")
    assert dto["fileStatus"]["path"]["uri"] == dto["fullPath"]
    assert dto["fileStatus"]["length"] == dto["fileLen"] > 0
    assert dto["fileStatus"]["isdir"] is False
    assert dto["bootstrapBaseFile"] is None
    name = dto["fullPath"].rsplit("/", 1)[-1]
    assert name.startswith(dto["fileId"] + "_") and name.endswith(f"_{dto['commitTime']}.parquet")


def check_slice(dto: dict, base_path: str) -> None:
    assert set(dto) == FILE_SLICE_DTO
    if dto["baseFile"] is not None:
        check_base_file(dto["baseFile"], base_path)
    assert isinstance(dto["logFiles"], list)
    for log in dto["logFiles"]:
        assert set(log) == LOG_FILE_DTO
        assert set(log["fileStatus"]) == FILE_STATUS_DTO_0X
        assert log["path"].startswith(base_path + "/")
        assert log["fileStatus"]["path"]["uri"] == log["path"]
        assert log["len"] == log["fileStatus"]["length"] > 0


def test_slice_base_file_group_and_timeline_dtos(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = tmp_path / "trips"
    own_table(root, 6)
    base_path = register(root)
    client = JavaViewClient(http, base_path, root)
    slices = client.get_latest_file_slices("eu")
    assert slices and any(s["logFiles"] for s in slices)
    for dto in slices:
        check_slice(dto, base_path)
        logs = [lf["path"] for lf in dto["logFiles"]]
        versions = [int(p.split(".log.")[1].split("_")[0]) for p in logs]
        assert versions == sorted(versions, reverse=True), "FileSlice holds logs newest first"
    for dto in client.get_latest_base_files("us"):
        check_base_file(dto, base_path)

    groups = client.call("filegroups/all/partition/", partition="eu")
    assert len(groups) == len(slices)
    assert all(set(g) == FILE_GROUP_DTO for g in groups)
    # DTOUtils.fileGroupDTOsfromFileGroups: the (write) timeline on the first group only
    assert set(groups[0]["timeline"]) == TIMELINE_DTO and groups[0]["timeline"]["instants"]
    assert all(g["timeline"] is None for g in groups[1:])
    for group in groups:
        times = [s["baseInstant"] for s in group["slices"]]
        assert times == sorted(times, reverse=True), "HoodieFileGroup holds slices newest first"
        for piece in group["slices"]:
            check_slice(piece, base_path)

    timeline = client.get_timeline()
    assert set(timeline) == TIMELINE_DTO
    assert all(set(i) == INSTANT_DTO for i in timeline["instants"])
    assert [(i["ts"], i["action"], i["state"]) for i in timeline["instants"]] == client.instants
    # Hudi 1.x's client builds each instant from these two
    assert all(i["requestedTime"] == i["ts"] for i in timeline["instants"])
    assert all(
        (i["completionTime"] is not None) == (i["state"] == "COMPLETED")
        for i in timeline["instants"]
    )
    last = client.call("timeline/instant/last")
    assert last == [timeline["instants"][-1]]
    assert client.call("refresh/", method="POST") is True
    # empty answers are empty lists, never null
    assert client.call("compactions/pending/") == []
    assert client.call("clustering/pending/") == []
    assert client.call("filegroups/replaced/partition/", partition="eu") == []
    assert client.get_latest_file_slices("no/such/partition") == []


def test_pending_compaction_and_clustering_dtos_from_hudi_written_plans(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    """The Hudi-written MOR fixture just before its compaction completed, and again just
    before its clustering completed: the plans as Hudi's client reads them back."""
    root = unzip_fixture("mor_avro_v9_txns_simple_nometa", tmp_path)
    timeline = HudiTable.open(str(root)).timeline()
    compaction = timeline.last_compaction()
    clustering = timeline.last_clustering()
    assert compaction is not None and clustering is not None
    assert compaction.requested_time < clustering.requested_time
    for later in instant_times(root):
        if later > clustering.requested_time:
            drop_instant(root, later)
    drop_instant(root, clustering.requested_time, completed_only=True)
    client = JavaViewClient(http, register(root), root)

    pending = client.call("clustering/pending/")
    plan = (
        HudiTable.open(str(root))
        .timeline()
        .clustering_plan(HudiTable.open(str(root)).timeline().pending_clusterings()[0])
    )
    planned = {(s["partitionPath"], s["fileId"]) for g in plan["inputGroups"] for s in g["slices"]}
    assert pending and all(set(p) == CLUSTERING_OP_DTO for p in pending)
    assert {(p["partition"], p["id"]) for p in pending} == planned
    assert {(p["instantTime"], p["instantAction"], p["instantState"]) for p in pending} == {
        (clustering.requested_time, "clustering", "REQUESTED")
    }

    for later in instant_times(root):
        if later > compaction.requested_time:
            drop_instant(root, later)
    drop_instant(root, compaction.requested_time, completed_only=True)
    client.refresh()
    ops = client.call("compactions/pending/")
    assert ops and all(set(op) == COMPACTION_OP_DTO for op in ops)
    plan = (
        HudiTable.open(str(root))
        .timeline()
        .compaction_plan(HudiTable.open(str(root)).timeline().pending_compactions()[0])
    )
    by_id = {op["fileId"]: op for op in plan["operations"]}
    for op in ops:
        source = by_id[op["id"]]
        assert op["compactionInstant"] == compaction.requested_time
        assert op["baseInstant"] == source["baseInstantTime"]
        assert op["baseFile"] == source["dataFilePath"]
        assert op["deltaFiles"] == source["deltaFilePaths"]
        assert op["partition"] == source["partitionPath"]
        assert op["externalBaseFile"] is None
        if op["baseFile"]:
            assert op["dataFileInstant"] == op["baseFile"].rsplit("_", 1)[1].split(".")[0]
    # the client's timeline ends with the pending compaction (filterCompletedAndCompactionInstants)
    assert client.instants[-1][:2] == (compaction.requested_time, "compaction")
    # writers append to the compaction's new, empty slice; the uncompacted view skips it
    planned_ids = {op["id"] for op in ops}
    partition = ops[0]["partition"]
    latest = {s["fileId"]: s for s in client.get_latest_file_slices(partition)}
    uncompacted = {
        s["fileId"]: s
        for s in client.call("slices/uncompacted/partition/latest/", partition=partition)
    }
    merged = {
        s["fileId"]: s
        for s in client.call(
            "slices/merged/beforeoron/latest/",
            partition=partition,
            maxinstant=compaction.requested_time,
        )
    }
    for file_id in planned_ids & set(latest):
        assert latest[file_id]["baseInstant"] == compaction.requested_time
        assert latest[file_id]["baseFile"] is None
        assert uncompacted[file_id]["baseInstant"] < compaction.requested_time
        assert merged[file_id]["baseInstant"] == uncompacted[file_id]["baseInstant"]
        assert merged[file_id]["baseFile"] == uncompacted[file_id]["baseFile"]
