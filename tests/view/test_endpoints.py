"""The rest of the served calls, on the Hudi-written copy-on-write table with an insert
overwrite and a clustering (replaced file groups): each answer checked against the files on
disk, the instants' names and the answers of the calls the other tests compare with hudi-rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from tests.hudi.test_fixture_views import unzip_fixture
from tests.view.conftest import Register, own_table
from tests.view.java_client import JavaViewClient
from tests.view.test_reads import partitions_of


def name(dto: dict[str, Any]) -> str:
    return str(dto["fullPath"]).rsplit("/", 1)[-1]


def test_every_read_call_agrees_with_the_files_and_the_other_calls(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = unzip_fixture("cow_v9_txns_simple_nometa", tmp_path)
    client = JavaViewClient(http, register(root), root)
    partitions = partitions_of(root)
    completed = [ts for ts, _, state in client.instants if state == "COMPLETED"]
    replaces = [ts for ts, action, state in client.instants if action == "replacecommit"]
    assert len(replaces) == 2, "an insert overwrite and a clustering"
    last = completed[-1]

    latest = {p: client.get_latest_base_files(p) for p in partitions}
    slices = {p: client.get_latest_file_slices(p) for p in partitions}
    flat = sorted(name(d) for ds in latest.values() for d in ds)

    assert sorted(name(d) for d in client.call("datafiles/all/latest/")) == flat
    assert (
        sorted(
            name(d) for d in client.call("datafiles/range/latest/", instants=",".join(completed))
        )
        == flat
    )
    assert sorted(
        name(s["baseFile"])
        for s in client.call("slices/range/latest/", instants=",".join(completed))
    ) == sorted(name(s["baseFile"]) for ss in slices.values() for s in ss)
    by_partition = client.call("basefiles/all/beforeoron/", maxinstant=last)
    assert {p: sorted(map(name, ds)) for p, ds in by_partition.items()} == {
        p: sorted(map(name, ds)) for p, ds in latest.items()
    }

    live_ids: set[str] = set()
    for partition in partitions:
        for dto in latest[partition]:
            live_ids.add(dto["fileId"])
            on = client.call(
                "datafile/on/latest/",
                partition=partition,
                instant=dto["commitTime"],
                fileid=dto["fileId"],
            )
            assert [name(d) for d in on] == [name(dto)]
            one = client.call(
                "datafile/latest/partition", partition=partition, fileid=dto["fileId"]
            )
            assert [name(d) for d in one] == [name(dto)]
            piece = client.call("slices/file/latest/", partition=partition, fileid=dto["fileId"])
            assert [name(s["baseFile"]) for s in piece] == [name(dto)]
            merged = client.call(
                "slice/merged/beforeoron/latest/",
                partition=partition,
                maxinstant=last,
                fileid=dto["fileId"],
            )
            assert [name(s["baseFile"]) for s in merged] == [name(dto)]
        assert (
            client.call("datafile/latest/partition", partition=partition, fileid="no-such-id") == []
        )

    # datafiles/all: every committed base file of a live file group, as on disk
    on_disk = {
        f.name
        for f in root.rglob("*.parquet")
        if ".hoodie" not in f.parts and f.name.rsplit("_", 1)[1].split(".")[0] in completed
    }
    all_files = {name(d) for p in partitions for d in client.call("datafiles/all", partition=p)}
    assert all_files == {f for f in on_disk if f.split("_", 1)[0] in live_ids}
    assert set(flat) <= all_files
    assert {
        name(s["baseFile"]) for p in partitions for s in client.call("slices/all", partition=p)
    } == all_files

    # replaced file groups by instant: before excludes the replacing instant, before-or-on
    # and after-or-on include it
    for replace in replaces:
        at = set()
        for partition in partitions:
            on_or_before = client.call(
                "filegroups/replaced/beforeoron/", partition=partition, maxinstant=replace
            )
            before = client.call(
                "filegroups/replaced/before/", partition=partition, maxinstant=replace
            )
            after = client.call(
                "filegroups/replaced/afteroron/", partition=partition, mininstant=replace
            )
            every = client.call("filegroups/replaced/partition/", partition=partition)
            ids = lambda groups: {g["fileId"] for g in groups}  # noqa: E731
            at |= ids(on_or_before) - ids(before)
            assert ids(on_or_before) | ids(after) == ids(every)
            assert not ids(every) & live_ids
            for group in every:
                assert group["slices"], "a replaced file group keeps its slices"
        assert at, f"{replace} replaced file groups"
    assert client.call("logcompactions/pending/") == []

    # the 1.x calls: the view's hash is the client's, the loads are acknowledged
    assert client.call("timeline/hash") == client.url("x", {}).split("timelinehash=")[1]
    for post in ("inittimeline", "loadallpartitions/", "loadpartitions/", "close/"):
        assert client.call(post, method="POST") is True


def test_all_base_files_and_slices_keep_older_versions_on_a_version_6_table(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = tmp_path / "trips"
    own_table(root, 6, table_type="COPY_ON_WRITE")
    client = JavaViewClient(http, register(root), root)
    for partition in ("eu", "us"):
        latest = {name(d) for d in client.get_latest_base_files(partition)}
        every = {name(d) for d in client.call("datafiles/all", partition=partition)}
        on_disk = {f.name for f in (root / partition).glob("*.parquet")}
        assert latest < every == on_disk, "the upsert wrote new versions of file groups"
        slices = client.call("slices/all", partition=partition)
        assert {name(s["baseFile"]) for s in slices} == every
        groups = client.call("filegroups/all/partition/", partition=partition)
        assert sum(len(g["slices"]) for g in groups) == len(slices)
        oldest = min(d["commitTime"] for d in client.call("datafiles/all", partition=partition))
        before = client.call("datafiles/beforeoron/latest/", partition=partition, maxinstant=oldest)
        assert before and all(d["commitTime"] == oldest for d in before)
