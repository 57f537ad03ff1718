"""The cache stays current by push: a commit the store records advances the view without
listing partitions; a client's newer `timelinehash` makes it sync; a client behind the view
is refused as Hudi refuses it; a current view never touches storage."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker
from starlette.testclient import TestClient

from tests.view.conftest import MakeClient, Register, own_table, rows
from tests.view.java_client import JavaViewClient
from tests.view.test_reads import check_against_oracle
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.hudi.timeline.rollback_instant import RollbackInstant
from tms.hudi.timeline.transitions import new_instant_time
from tms.metrics import REGISTRY
from tms.store import CommitIn, find_table_by_base_path, record_commits
from tms.view import ViewCache, ViewHandler


def listings() -> float:
    return REGISTRY.get_sample_value("tms_view_storage_listings_total") or 0.0


def requests(cache: str, endpoint: str = "LATEST_PARTITION_SLICES") -> float:
    labels = {"endpoint": endpoint, "cache": cache}
    return REGISTRY.get_sample_value("tms_view_requests_total", labels) or 0.0


def saved() -> float:
    return REGISTRY.get_sample_value("tms_view_listings_saved_total") or 0.0


def notify(factory: sessionmaker[Session], root: Path, instant: str, action: str) -> None:
    """What the commit callback (or the pull fallback) stores for a commit."""
    with factory() as session:
        table = find_table_by_base_path(session, str(root))
        assert table is not None
        record_commits(session, [CommitIn(tbl_id=table.id, instant=instant, action=action)])
        session.commit()


def test_a_current_view_is_listed_once_and_then_never(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = tmp_path / "trips"
    own_table(root, 6)
    client = JavaViewClient(http, register(root), root)
    before, misses, hits, saved_before = listings(), requests("miss"), requests("hit"), saved()
    client.get_latest_file_slices("eu")
    built = listings() - before
    assert built >= 3, "one cold build: the timeline, the root and both partitions"
    assert requests("miss") == misses + 1
    for _ in range(20):
        client.get_latest_file_slices("eu")
        client.get_latest_file_slices("us")
    assert listings() - before == built, "a current view lists nothing"
    assert requests("hit") == hits + 40
    assert saved() == saved_before + 40


def test_a_recorded_commit_advances_the_view_without_listing_partitions(
    tmp_path: Path, http: TestClient, register: Register, factory: sessionmaker[Session]
) -> None:
    root = tmp_path / "trips"
    writer = own_table(root, 9)
    client = JavaViewClient(http, register(root), root)
    check_against_oracle(client, root)

    instant = writer.upsert(rows(range(1, 50, 4), ts=3))
    notify(factory, root, instant, "deltacommit")
    client.reload()
    before, advanced = listings(), requests("advanced")
    check_against_oracle(client, root)
    assert requests("advanced") == advanced + 1
    assert listings() - before == 1, "only the timeline is listed: files come from metadata"
    slices = client.get_latest_file_slices("eu")
    assert any(instant in lf["path"] for s in slices for lf in s["logFiles"])

    # a new partition written by an insert appears the same way
    added = writer.insert(rows(range(100, 104), ts=4).set_column(1, "region", [["apac"] * 4]))
    notify(factory, root, added, "deltacommit")
    client.reload()
    before = listings()
    check_against_oracle(client, root)
    assert listings() - before == 1
    assert [s["partition"] for s in client.get_latest_file_slices("apac")] == ["apac"]


def test_a_client_with_a_newer_timeline_makes_the_view_sync(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    """No notification (a writer without the callback): the client's timeline hash says the
    view is behind, so the server syncs before it answers, as Hudi's does."""
    root = tmp_path / "trips"
    writer = own_table(root, 6)
    client = JavaViewClient(http, register(root), root)
    check_against_oracle(client, root)
    writer.upsert(rows(range(0, 50, 5), ts=5))
    client.reload()
    synced = requests("synced")
    check_against_oracle(client, root)
    assert requests("synced") == synced + 1


def test_a_client_behind_the_view_is_refused_as_hudi_refuses_it(
    tmp_path: Path, http: TestClient, register: Register, factory: sessionmaker[Session]
) -> None:
    root = tmp_path / "trips"
    writer = own_table(root, 6)
    base_path = register(root)
    stale = JavaViewClient(http, base_path, root)
    fresh = JavaViewClient(http, base_path, root)
    stale.get_latest_file_slices("eu")
    instant = writer.upsert(rows(range(0, 50, 7), ts=6))
    notify(factory, root, instant, "deltacommit")
    fresh.reload()
    fresh.get_latest_file_slices("eu")

    response = stale.raw("slices/partition/latest/", partition="eu")
    assert response.status_code == 400
    body = response.json()["error"]
    assert body["field"] == "timelinehash"
    assert body["message"].startswith(f"Last known instant from client was {stale.instants[-1][0]}")
    # `refreshoff=true` skips the check, as in Hudi; the timeline calls never check
    assert (
        stale.raw("slices/partition/latest/", partition="eu", refreshoff="true").status_code == 200
    )
    assert stale.raw("timeline/instants/all").status_code == 200
    stale.refresh()
    assert stale.raw("slices/partition/latest/", partition="eu").status_code == 200


def test_a_bogus_client_timeline_syncs_a_table_at_most_once_per_interval(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    """A `lastinstantts` the table never had (or `refresh` on every call) asks for a sync
    each time: the view lists storage once per `sync_interval`, whatever clients send."""
    root = tmp_path / "trips"
    own_table(root, 6)
    base_path = register(root)
    clock = [1000.0]
    handler = ViewHandler(ViewCache(8), ref_ttl=0, sync_interval=1.5, clock=lambda: clock[0])
    http.app.state.view_handler = handler
    client = JavaViewClient(http, base_path, root)
    client.get_latest_file_slices("eu")  # built
    bogus = {
        "basepath": base_path,
        "partition": "eu",
        "lastinstantts": "29991231235959999",
        "timelinehash": "0123abcd",
    }

    def ask(times: int) -> set[int]:
        url = "/v1/hoodie/view/slices/partition/latest/"
        answers = {http.get(url, params=bogus).status_code for _ in range(times)}
        answers |= {http.post("/v1/hoodie/view/refresh/", params=bogus).status_code}
        return answers

    before = listings()
    assert ask(200) == {400, 200}  # behind the client's (bogus) timeline; refresh says true
    assert listings() - before == 1, "one sync: the timeline listed once"
    clock[0] += 1.4
    ask(50)
    assert listings() - before == 1
    assert client.get_latest_file_slices("eu"), "a current client is answered meanwhile"
    clock[0] += 0.1
    ask(50)
    assert listings() - before == 2, "the next interval: one more sync"


def test_least_recently_used_tables_leave_the_cache(
    tmp_path: Path, make_client: MakeClient, register: Register
) -> None:
    http = make_client(view_cache_tables=1)
    first, second = tmp_path / "a", tmp_path / "b"
    own_table(first, 6)
    own_table(second, 9)
    a = JavaViewClient(http, register(first), first)
    b = JavaViewClient(http, register(second), second)
    misses = requests("miss")
    a.get_latest_file_slices("eu")
    a.get_latest_file_slices("eu")
    b.get_latest_file_slices("eu")
    a.get_latest_file_slices("eu")
    assert requests("miss") == misses + 3
    assert len(http.app.state.view_handler.cache) == 1


def test_a_rollback_lists_again_only_the_partitions_it_names(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    """A write that crashed before completing is rolled back: its files go, a completed
    rollback instant names their partitions, and only those are listed again."""
    root = tmp_path / "trips"
    writer = own_table(root, 6, table_type="COPY_ON_WRITE")
    client = JavaViewClient(http, register(root), root)
    check_against_oracle(client, root)

    instant = writer.upsert(rows(range(1, 50, 2), ts=7))  # odd ids: partition "eu" only
    table = HudiTable.open(str(root))
    timeline = table.timeline()
    written = timeline.commit_metadata(timeline.get(instant))  # type: ignore[arg-type]
    files = {
        p: [s.path for s in stats if s.path]
        for p, stats in written.partition_to_write_stats.items()
    }
    assert list(files) == ["eu"]
    for path in (root / ".hoodie").glob(f"{instant}*"):
        path.unlink()  # the write never completed
    rollback = RollbackInstant(
        table.storage,
        table.config,
        new_instant_time(timeline.instants),
        (instant, Action.COMMIT),
        files,
    )
    rollback.start()
    rollback.delete_files()
    rollback.complete()

    client.reload()
    before, synced = listings(), requests("synced")
    check_against_oracle(client, root)
    assert requests("synced") == synced + 1
    assert listings() - before == 2, "the timeline and the one partition the rollback names"


def without_times(value: object) -> object:
    """An answer without `modificationTime` (files learnt from commit metadata carry 0)."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k != "modificationTime"}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def test_an_advanced_view_answers_as_a_view_built_from_scratch(
    tmp_path: Path,
    make_client: MakeClient,
    register: Register,
    factory: sessionmaker[Session],
) -> None:
    """Commits applied one by one (inserts, upserts with log files, a new partition) give
    the answers a cold view of the same table gives, for every partition and call."""
    root = tmp_path / "trips"
    writer = own_table(root, 9)
    base_path = register(root)
    warm = JavaViewClient(make_client(), base_path, root)
    warm.get_latest_file_slices("eu")
    for n in range(3):
        data = rows(range(200 + 10 * n, 210 + 10 * n), ts=10 + n)
        if n == 2:
            data = data.set_column(1, "region", [["apac"] * 10])
        notify(factory, root, writer.insert(data), "deltacommit")
        notify(factory, root, writer.upsert(rows(range(n, 60, 7), ts=20 + n)), "deltacommit")
        warm.reload()
        warm.get_latest_file_slices("us")
    cold = JavaViewClient(make_client(), base_path, root)
    calls = [
        ("slices/partition/latest/", {}),
        ("slices/all", {}),
        ("datafiles/latest/partition", {}),
        ("filegroups/all/partition/", {}),
        (
            "slices/beforeoron/latest/",
            {"maxinstant": warm.instants[-3][0], "includependingcompaction": "false"},
        ),
    ]
    for partition in ("eu", "us", "apac"):
        for path, extra in calls:
            ours = warm.call(path, partition=partition, **extra)
            assert ours or (path, partition) == ("slices/beforeoron/latest/", "apac")
            assert without_times(ours) == without_times(
                cold.call(path, partition=partition, **extra)
            )
    assert warm.get_timeline() == cold.get_timeline()


def test_concurrent_first_requests_build_the_view_once(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = tmp_path / "trips"
    own_table(root, 6)
    client = JavaViewClient(http, register(root), root)
    misses, before = requests("miss"), listings()
    barrier = threading.Barrier(8)
    answers: list[int] = []

    def ask() -> None:
        barrier.wait()
        answers.append(len(client.get_latest_file_slices("eu")))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 8 and len(set(answers)) == 1
    assert requests("miss") == misses + 1
    assert listings() - before == 4, "one build: the timeline, the root, two partitions"
