"""Plans tms schedules on a version 6 table (timeline layout 1), seen by a writer through the
view: a pending compaction splits the slices as Hudi's view splits them and writers append to
the new slice; a pending clustering names its file groups with the `replacecommit` action
layout 1 requests it as."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker
from starlette.testclient import TestClient

from tests.view.conftest import Register, own_table, rows
from tests.view.java_client import JavaViewClient
from tests.view.test_freshness import notify, requests
from tests.view.test_reads import oracle_slices
from tms.hudi.table import HudiTable
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.plan import schedule_compaction
from tms.store import ServiceAction, find_table_by_base_path, submit_operation


def test_a_pending_compaction_on_a_version_6_table(
    tmp_path: Path, http: TestClient, register: Register, factory: sessionmaker[Session]
) -> None:
    root = tmp_path / "trips"
    writer = own_table(root, 6)
    client = JavaViewClient(http, register(root), root)
    client.get_latest_file_slices("eu")

    compaction = schedule_compaction(HudiTable.open(str(root)))
    assert compaction is not None
    client.reload()  # the writer's timeline now ends with the requested compaction
    assert client.instants[-1] == (compaction, "compaction", "REQUESTED")
    synced = requests("synced", "PEDING_COMPACTION_OPS")
    ops = client.call("compactions/pending/")
    assert requests("synced", "PEDING_COMPACTION_OPS") == synced + 1
    planned = {(op["partition"], op["id"]) for op in ops}
    assert planned and {op["compactionInstant"] for op in ops} == {compaction}

    # an upsert after the plan appends to the compaction's new slice (logs named by it)
    instant = writer.upsert(rows(range(1, 50, 2), ts=9))
    notify(factory, root, instant, "deltacommit")
    client.reload()
    latest = {s["fileId"]: s for s in client.get_latest_file_slices("eu")}
    merged = {
        s["fileId"]: s
        for s in client.call("slices/merged/beforeoron/latest/", partition="eu", maxinstant=instant)
    }
    uncompacted = {
        s["fileId"]: s for s in client.call("slices/uncompacted/partition/latest/", partition="eu")
    }
    appended = 0
    for partition, file_id in planned:
        if partition != "eu":
            continue
        assert latest[file_id]["baseInstant"] == compaction
        assert latest[file_id]["baseFile"] is None
        appended += bool(latest[file_id]["logFiles"])
        assert all(f"_{compaction}.log." in lf["path"] for lf in latest[file_id]["logFiles"])
        before = uncompacted[file_id]
        assert before["baseInstant"] < compaction and before["baseFile"] is not None
        assert merged[file_id]["baseFile"] == before["baseFile"]
        assert len(merged[file_id]["logFiles"]) == len(before["logFiles"]) + len(
            latest[file_id]["logFiles"]
        )
    assert appended, "the upsert wrote into the compaction's new slices"
    # hudi-rs reads the slice before the compaction: the same base file and its logs; the
    # logs named by the pending compaction's instant (layout 1) it leaves out, where Hudi's
    # merged slice (`fetchMergedFileSlice`) adds them
    expected = {s["file_id"]: s for s in oracle_slices(root) if s["partition"] == "eu"}
    for file_id, piece in merged.items():
        assert piece["baseFile"]["fullPath"].endswith(expected[file_id]["base_file"])
        names = [lf["path"].rsplit("/", 1)[-1] for lf in piece["logFiles"]]
        assert set(expected[file_id]["log_files"]) <= set(names)
        assert all(
            f"_{compaction}.log." in n for n in set(names) - set(expected[file_id]["log_files"])
        )
    # without pending compactions, slices before-or-on skip the file groups being compacted
    without = client.call(
        "slices/beforeoron/latest/",
        partition="eu",
        maxinstant=instant,
        includependingcompaction="false",
    )
    assert not {s["fileId"] for s in without} & {f for p, f in planned if p == "eu"}


def test_a_clustering_tms_plans_on_a_version_6_table_reaches_the_view(
    tmp_path: Path, http: TestClient, register: Register, factory: sessionmaker[Session]
) -> None:
    """A pending clustering is not on the client's timeline (its hash does not change) and no
    commit announces it: the view learns of it from the operation tms planned it for."""
    root = tmp_path / "trips"
    own_table(root, 6, table_type="COPY_ON_WRITE")
    client = JavaViewClient(http, register(root), root)
    client.get_latest_file_slices("eu")
    clustering = schedule_clustering(HudiTable.open(str(root)), small_file_limit=10**9)
    assert clustering is not None
    with factory() as session:  # what the clustering job reports once it wrote its plan
        table = find_table_by_base_path(session, str(root))
        assert table is not None
        submit_operation(
            session, tbl_id=table.id, action=ServiceAction.CLUSTERING, instant=clustering
        )
        session.commit()
    client.reload()
    advanced = requests("advanced", "PENDING_CLUSTERING_FILEGROUPS")
    pending = client.call("clustering/pending/")
    assert requests("advanced", "PENDING_CLUSTERING_FILEGROUPS") == advanced + 1
    assert {(p["instantTime"], p["instantAction"], p["instantState"]) for p in pending} == {
        (clustering, "replacecommit", "REQUESTED")
    }
    plan = HudiTable.open(str(root)).timeline()
    planned = {
        (piece["partitionPath"], piece["fileId"])
        for group in plan.clustering_plan(plan.pending_clusterings()[0])["inputGroups"]
        for piece in group["slices"]
    }
    assert {(p["partition"], p["id"]) for p in pending} == planned
