"""The marker API as Hudi's `TimelineServerBasedWriteMarkers` calls it, replayed request by
request, and the files it leaves: what Hudi's `MarkerUtils` reads back (every `MARKERS*`
file but `MARKERS.type`, line by line; `MARKERS.type` naming the marker type exactly) and
what our own marker reader (rollback, reconciliation) reads."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from tests.markers.conftest import BASE, Serve, Table, create, get, register
from tms.hudi.files.markers import Marker, MarkerType, list_markers
from tms.hudi.storage import Storage
from tms.metrics import MARKERS_CREATED

INSTANT = "20260101120000000"


def hudi_reads(folder: Path) -> set[str]:
    """`MarkerUtils.readTimelineServerBasedMarkersFromFileSystem`, as Hudi reads the files."""
    found: set[str] = set()
    for path in folder.iterdir():
        if path.name.startswith("MARKERS") and path.name != "MARKERS.type":
            found |= set(path.read_text(encoding="utf-8").splitlines())
    return found


def names(table: Table) -> dict[str, str]:
    (partition, file_id), *_ = table.file_groups()
    prefix = f"{partition}/" if partition else ""
    return {
        "create": f"{prefix}{file_id}_1-0-1_{INSTANT}.parquet.marker.CREATE",
        "merge": f"{prefix}{file_id}_2-0-1_{INSTANT}.parquet.marker.MERGE",
        "append": f"{prefix}.{file_id}_{INSTANT}.log.1_3-0-1.marker.APPEND",
    }


def test_markers_are_served_and_stored_as_hudis_timeline_server_stores_them(
    serve: Serve, table: Table
) -> None:
    marker_dir = table.marker_dir(INSTANT)
    table.begin(INSTANT)
    folder = Path(table.base_path) / ".hoodie" / ".temp" / INSTANT
    wanted = names(table)
    before = MARKERS_CREATED._value.get()
    with serve() as client:
        assert get(client, "dir/exists", marker_dir) is False
        assert get(client, "all", marker_dir) == []
        for name in wanted.values():
            assert create(client, marker_dir, name) is True
        assert create(client, marker_dir, wanted["create"]) is False, "a marker exists once"
        assert get(client, "dir/exists", marker_dir) is True
        assert set(get(client, "all", marker_dir)) == set(wanted.values())
        assert set(get(client, "create-and-merge", marker_dir)) == {
            wanted["create"],
            wanted["merge"],
        }
        assert get(client, "append", marker_dir) == [wanted["append"]]
    assert MARKERS_CREATED._value.get() - before == 3

    assert (folder / "MARKERS.type").read_bytes() == b"TIMELINE_SERVER_BASED"
    assert {p.name for p in folder.iterdir()} - {"MARKERS.type"} <= {
        f"MARKERS{i}" for i in range(20)
    }
    assert hudi_reads(folder) == set(wanted.values())
    for path in folder.glob("MARKERS[0-9]*"):
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n") and "" not in text.splitlines()
    ours = list_markers(Storage(table.base_path), INSTANT)
    assert sorted(m.name for m in ours) == sorted(wanted.values())
    assert {m.marker_type for m in ours} == set(MarkerType)
    assert all(isinstance(m, Marker) for m in ours)

    with serve() as client:  # a restarted server reads them back from storage
        assert set(get(client, "all", marker_dir)) == set(wanted.values())
        assert create(client, marker_dir, wanted["merge"]) is False
        extra = wanted["create"].replace("_1-0-1_", "_9-0-1_")
        assert create(client, marker_dir, extra) is True
        assert hudi_reads(folder) == {*wanted.values(), extra}
        answer = client.post(f"{BASE}/dir/delete", params={"markerdirpath": marker_dir})
        assert answer.status_code == 200 and answer.json() is False, "its writer is pending"
        assert hudi_reads(folder) == {*wanted.values(), extra}
        table.complete(INSTANT)
        answer = client.post(f"{BASE}/dir/delete", params={"markerdirpath": marker_dir})
        assert answer.status_code == 200 and answer.json() is True
        assert not folder.exists()
        assert get(client, "dir/exists", marker_dir) is False
        assert get(client, "all", marker_dir) == []


def test_many_markers_at_once_are_batched_into_few_files(serve: Serve, table: Table) -> None:
    """Concurrent requests (a Spark stage's tasks) gather into batches, each rewriting one
    `MARKERS<n>` file; every marker is stored exactly once."""
    import concurrent.futures

    marker_dir = table.marker_dir(INSTANT)
    table.begin(INSTANT)
    folder = Path(table.base_path) / ".hoodie" / ".temp" / INSTANT
    (partition, _), *_ = table.file_groups()
    prefix = f"{partition}/" if partition else ""
    wanted = [f"{prefix}f{i:03d}-0_{i}-0-1_{INSTANT}.parquet.marker.CREATE" for i in range(120)]
    with serve(marker_batch_files=3, marker_batch_interval_ms=20) as client:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda n: create(client, marker_dir, n), wanted))
        assert results == [True] * len(wanted)
        assert sorted(get(client, "all", marker_dir)) == sorted(wanted)
    files = sorted(p.name for p in folder.glob("MARKERS[0-9]*"))
    assert set(files) <= {"MARKERS0", "MARKERS1", "MARKERS2"}
    lines = [ln for p in folder.glob("MARKERS[0-9]*") for ln in p.read_text().splitlines()]
    assert sorted(lines) == sorted(wanted), "each marker in exactly one file, once"


def test_a_marker_folder_in_hadoops_spelling_names_the_same_table(
    serve: Serve, table: Table
) -> None:
    """`StoragePath.toString()` of a local table is `file:/…`; a trailing slash, `//` and
    `file:///` name the same table."""
    table.begin(INSTANT)
    name = names(table)["create"]
    with serve() as client:
        assert create(client, f"file:{table.marker_dir(INSTANT)}", name) is True
        assert create(client, f"file://{table.marker_dir(INSTANT)}/", name) is False
        assert get(client, "all", table.marker_dir(INSTANT)) == [name]


def test_refusals_name_the_parameter_and_write_nothing(
    serve: Serve, table: Table, tmp_path: Path, factory: sessionmaker[Session]
) -> None:
    marker_dir = table.marker_dir(INSTANT)
    table.begin(INSTANT)
    folder = Path(table.base_path) / ".hoodie" / ".temp" / INSTANT
    good = names(table)["create"]
    bad_names = [
        "../../outside.parquet.marker.CREATE",
        "p/../../../etc/x.parquet.marker.CREATE",
        "/abs/x.parquet.marker.CREATE",
        ".hoodie/hoodie.properties.marker.CREATE",
        "p//x.parquet.marker.CREATE",
        "p/x.parquet.marker.DELETE",
        "p/x.parquet",
        "",
        "s3://other/x.parquet.marker.CREATE",
        "p\\x.parquet.marker.CREATE",
    ]
    other = tmp_path / "other"
    other.mkdir()
    with serve() as client:
        for bad in bad_names:
            answer = client.post(
                f"{BASE}/create", params={"markerdirpath": marker_dir, "markername": bad}
            )
            assert answer.status_code == 422, (bad, answer.text)
            assert answer.json()["error"]["field"] == "markername", bad
        for bad_dir in [
            f"{table.base_path}/.hoodie/.temp/not-an-instant",
            f"{table.base_path}/.hoodie/{INSTANT}",
            f"{table.base_path}/.hoodie/.temp/../../x/.hoodie/.temp/{INSTANT}",
            "relative/.hoodie/.temp/" + INSTANT,
            "",
        ]:
            answer = client.post(
                f"{BASE}/create", params={"markerdirpath": bad_dir, "markername": good}
            )
            assert answer.status_code in (404, 422), (bad_dir, answer.text)
            assert answer.json()["error"]["field"] == "markerdirpath", bad_dir
        unregistered = f"{other}/.hoodie/.temp/{INSTANT}"
        answer = client.get(f"{BASE}/all", params={"markerdirpath": unregistered})
        assert answer.status_code == 404
        assert answer.json()["error"]["field"] == "markerdirpath"
        register(factory, str(other), "other")
        answer = client.post(
            f"{BASE}/create",
            params={"markerdirpath": marker_dir, "markername": good, "basepath": str(other)},
        )
        assert answer.status_code == 422 and answer.json()["error"]["field"] == "basepath"
    assert not folder.exists(), "nothing written for a refused request"
    assert not (Path(table.base_path).parent / "outside.parquet").exists()
    with serve(timeline_server_enabled=False) as client:
        answer = client.get(f"{BASE}/all", params={"markerdirpath": marker_dir})
        assert answer.status_code == 404


def test_the_routes_take_no_bearer_token_even_with_authentication_on(
    serve: Serve, table: Table
) -> None:
    """Hudi's client sends no API key: markers are served without one (registered tables
    only), while the rest of the API still asks for it."""
    table.begin(INSTANT)
    with serve(auth_tokens="admin:adm1n-7f3c9e") as client:
        assert create(client, table.marker_dir(INSTANT), names(table)["create"]) is True
        assert client.get("/v1/tables").status_code == 401


def test_storage_that_cannot_be_read_is_502_without_its_details(
    serve: Serve, tmp_path: Path, factory: sessionmaker[Session]
) -> None:
    """A registered base path holding no table (its `hoodie.properties` gone)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    register(factory, str(gone), "gone")
    with serve() as client:
        answer = client.post(
            f"{BASE}/create",
            params={
                "markerdirpath": f"{gone}/.hoodie/.temp/{INSTANT}",
                "markername": f"f1-0_0-1-0_{INSTANT}.parquet.marker.CREATE",
            },
        )
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == "storage_error"
    assert "hoodie.properties" not in answer.text


def test_a_create_with_hudi_1x_json_body_is_served_as_one_without(
    serve: Serve, table: Table
) -> None:
    """Hudi 1.x's `TimelineServiceClient` posts with a JSON content type (and whatever body
    the request holds); the parameters are in the query all the same."""
    table.begin(INSTANT)
    name = names(table)["create"]
    params = {"markerdirpath": table.marker_dir(INSTANT), "markername": name}
    with serve() as client:
        for body in ("", "null", "{}"):
            answer = client.post(
                f"{BASE}/create",
                params=params,
                content=body,
                headers={"Content-Type": "application/json; charset=UTF-8"},
            )
            assert answer.status_code == 200, answer.text
        assert get(client, "all", table.marker_dir(INSTANT)) == [name]


def test_storage_that_never_answers_is_504_within_the_storage_timeout(
    serve: Serve, tmp_path: Path, factory: sessionmaker[Session]
) -> None:
    """A table whose `hoodie.properties` is a FIFO nobody writes: opening it blocks for good.
    The request is answered 504 after the storage timeout, not held until storage answers."""
    hung = tmp_path / "hung"
    (hung / ".hoodie").mkdir(parents=True)
    fifo = hung / ".hoodie" / "hoodie.properties"
    os.mkfifo(fifo)
    register(factory, str(hung), "hung")
    try:
        with serve(storage_timeout_seconds=1) as client:
            answer = client.post(
                f"{BASE}/create",
                params={
                    "markerdirpath": f"{hung}/.hoodie/.temp/{INSTANT}",
                    "markername": f"f1-0_0-1-0_{INSTANT}.parquet.marker.CREATE",
                },
            )
            assert answer.status_code == 504, answer.text
            assert answer.json()["error"]["code"] == "storage_timeout"
    finally:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the waiting reader goes on
    assert not (hung / ".hoodie" / ".temp").exists(), "nothing was written"
