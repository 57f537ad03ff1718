"""What the open marker routes refuse before anything is written: instants that are not
pending on the table's timeline, instants tms runs itself, malformed instant times, requests
over the limits and clients outside the allowed networks; and a pending writer's marker folder
is never deleted. Early conflict detection looks at writers in flight, not at every folder."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.markers.conftest import BASE, Serve, Table, create
from tms.config import SettingsError, load_settings
from tms.hudi.files import write_conflicts
from tms.hudi.table import HudiTable
from tms.hudi.timeline import heartbeat
from tms.hudi.timeline.instant import Action
from tms.metrics import MARKERS_REFUSED
from tms.store import ServiceAction, find_table_by_base_path, submit_operation

INSTANT = "20260101120000000"


def marker(i: int = 1, instant: str = INSTANT) -> str:
    return f"p/f{i}-0_0-1-0_{instant}.parquet.marker.CREATE"


def refused_count(reason: str) -> float:
    return MARKERS_REFUSED.labels(reason)._value.get()


def post(client: object, path: str, **params: str) -> object:
    return client.post(f"{BASE}/{path}", params=params)  # type: ignore[attr-defined]


def folder(table: Table, instant: str = INSTANT) -> Path:
    return Path(table.base_path) / ".hoodie" / ".temp" / instant


def test_markers_of_an_instant_not_pending_on_the_timeline_are_refused(
    serve: Serve, table: Table
) -> None:
    """A folder for an instant that does not exist, or that completed, is never made: the
    markers a client plants there could otherwise steer a reconciliation."""
    completed = HudiTable.open(table.base_path).timeline().commits()[-1].requested_time
    before = refused_count("instant_not_pending")
    with serve() as client:
        for instant in (INSTANT, completed):
            answer = post(
                client, "create", markerdirpath=table.marker_dir(instant), markername=marker()
            )
            assert answer.status_code == 409, answer.text
            error = answer.json()["error"]
            assert (error["code"], error["field"]) == ("marker_refused", "markerdirpath")
            assert "not requested or inflight" in error["message"]
            assert not folder(table, instant).exists()
        table.begin(INSTANT)
        assert create(client, table.marker_dir(INSTANT), marker()) is True
    assert refused_count("instant_not_pending") == before + 2


@pytest.mark.parametrize(
    "instant",
    [
        f"{INSTANT}\n",
        "２０２６０１０１１２００００",
        f"{INSTANT[:-3]}\n",
        f" {INSTANT}",
        "2026010112000",
    ],
    ids=["newline", "fullwidth-digits", "short-newline", "space", "13-digits"],
)
def test_an_instant_time_is_ascii_digits_on_the_whole_string(
    serve: Serve, table: Table, instant: str
) -> None:
    temp = Path(table.base_path) / ".hoodie" / ".temp"
    before = sorted(temp.rglob("*"))
    with serve() as client:
        answer = post(
            client, "create", markerdirpath=table.marker_dir(instant), markername=marker()
        )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "markerdirpath"
    assert sorted(temp.rglob("*")) == before


def test_markers_of_an_instant_tms_runs_are_refused(
    serve: Serve, table: Table, factory: sessionmaker[Session]
) -> None:
    """A compaction tms runs writes its markers itself (on storage); markers sent over the
    open routes for it are refused even while it is pending."""
    table.begin(INSTANT, action=Action.COMPACTION)
    with factory() as session:
        registered = find_table_by_base_path(session, table.base_path)
        assert registered is not None
        submit_operation(
            session, tbl_id=registered.id, action=ServiceAction.COMPACTION, instant=INSTANT
        )
        session.commit()
    before = refused_count("planned_by_tms")
    with serve() as client:
        answer = post(
            client, "create", markerdirpath=table.marker_dir(INSTANT), markername=marker()
        )
    assert answer.status_code == 409, answer.text
    assert "tms runs" in answer.json()["error"]["message"]
    assert not folder(table).exists()
    assert refused_count("planned_by_tms") == before + 1


def test_a_pending_writers_marker_folder_is_not_deleted(serve: Serve, table: Table) -> None:
    table.begin(INSTANT)
    with serve() as client:
        assert create(client, table.marker_dir(INSTANT), marker()) is True
        answer = post(client, "dir/delete", markerdirpath=table.marker_dir(INSTANT))
        assert answer.status_code == 200 and answer.json() is False
        assert list(folder(table).glob("MARKERS*"))
        table.complete(INSTANT)
        answer = post(client, "dir/delete", markerdirpath=table.marker_dir(INSTANT))
        assert answer.status_code == 200 and answer.json() is True
    assert not folder(table).exists()


def test_requests_over_a_limit_are_refused_and_counted(serve: Serve, table: Table) -> None:
    others = [f"2026010112000{i:04d}" for i in range(1, 3)]
    table.begin(INSTANT, *others)
    before = refused_count("limit")
    settings = {
        "marker_name_max_chars": 64,
        "markers_per_instant_max": 2,
        "marker_instants_per_table_max": 2,
    }
    with serve(**settings) as client:
        long_name = f"p/{'x' * 60}-0_0-1-0_{INSTANT}.parquet.marker.CREATE"
        answer = post(
            client, "create", markerdirpath=table.marker_dir(INSTANT), markername=long_name
        )
        assert answer.status_code == 409 and answer.json()["error"]["field"] == "markername"
        assert answer.json()["error"]["code"] == "marker_limit"
        assert create(client, table.marker_dir(INSTANT), marker(1)) is True
        assert create(client, table.marker_dir(INSTANT), marker(2)) is True
        assert create(client, table.marker_dir(INSTANT), marker(1)) is False, "known: no limit"
        answer = post(
            client, "create", markerdirpath=table.marker_dir(INSTANT), markername=marker(3)
        )
        assert answer.status_code == 409 and "markers_per_instant_max" in answer.text
        assert create(client, table.marker_dir(others[0]), marker(1, others[0])) is True
        answer = post(
            client,
            "create",
            markerdirpath=table.marker_dir(others[1]),
            markername=marker(1, others[1]),
        )
        assert answer.status_code == 409 and "marker_instants_per_table_max" in answer.text
        table.complete(INSTANT)  # no longer pending: its place is free
        assert create(client, table.marker_dir(others[1]), marker(1, others[1])) is True
    assert refused_count("limit") == before + 3


def test_clients_outside_the_allowed_networks_are_refused_before_any_work(
    serve: Serve, table: Table
) -> None:
    table.begin(INSTANT)
    with serve(timeline_server_allowed_networks="10.0.0.0/8") as client:
        answer = post(
            client, "create", markerdirpath=table.marker_dir(INSTANT), markername=marker()
        )
        assert answer.status_code == 403, answer.text
        view = client.get(
            "/v1/hoodie/view/timeline/instants/all/", params={"basepath": table.base_path}
        )
        assert view.status_code == 403, view.text
    assert not folder(table).exists()
    with pytest.raises(SettingsError, match="timeline_server_allowed_networks"):
        load_settings(
            config_file=False, environ={"TMS_TIMELINE_SERVER_ALLOWED_NETWORKS": "10.0.0.0/33"}
        )


def test_conflict_detection_reads_heartbeats_of_writers_in_flight_not_of_every_folder(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folders left by instants that are no longer pending (or never were) cost nothing."""
    hudi = HudiTable.open(table.base_path)
    writer, mine = "20260101120000001", "20260101120000002"
    table.begin(writer, mine)
    for i in range(300):
        junk = f"2026010100{i:07d}"
        hudi.storage.write_bytes(f".hoodie/.temp/{junk}/MARKERS0", b"")
        heartbeat.beat(hudi.storage, junk)
    heartbeat.beat(hudi.storage, writer)
    asked: list[str] = []
    is_alive = heartbeat.is_alive

    def counted(storage: object, ts: str, *args: object, **kwargs: object) -> bool:
        asked.append(ts)
        return is_alive(storage, ts, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(write_conflicts.heartbeat, "is_alive", counted)
    found = write_conflicts.live_writers(
        hudi.storage, hudi.timeline(), mine, tolerance_seconds=time.time()
    )
    assert found == [writer]
    assert asked == [writer]
