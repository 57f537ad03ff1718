"""A table on the move syncs as often as it moves: a writer's timeline changes several times
a second (an inline compaction is requested, then inflight, then committed), and a client
that tells of each change is synced to at once, as Hudi's server syncs, instead of being
refused until `sync_interval` passes (and falling back to listing storage itself). A bogus
timeline still costs one listing per interval."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from tests.view.conftest import Register, own_table, rows
from tests.view.java_client import JavaViewClient
from tests.view.test_freshness import listings, requests
from tests.view.test_reads import check_against_oracle
from tms.view import ViewCache, ViewHandler


def test_each_change_a_client_tells_of_is_synced_within_the_interval(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = tmp_path / "trips"
    writer = own_table(root, 6)
    clock = [1000.0]
    handler = ViewHandler(ViewCache(8), ref_ttl=0, sync_interval=60, clock=lambda: clock[0])
    http.app.state.view_handler = handler
    client = JavaViewClient(http, register(root), root)
    check_against_oracle(client, root)  # built

    for ts in (5, 6, 7):  # three commits within one interval, each seen by the client
        writer.upsert(rows(range(0, 50, ts), ts=ts))
        client.reload()
        synced = requests("synced")
        check_against_oracle(client, root)
        assert requests("synced") == synced + 1
        clock[0] += 1

    # the last sync found a change, so a bogus timeline gets one more sync, then no more
    bogus = {
        "basepath": client.base_path,
        "partition": "eu",
        "lastinstantts": "29991231235959999",
        "timelinehash": "0123abcd",
    }
    url = "/v1/hoodie/view/slices/partition/latest/"
    before = listings()
    assert {http.get(url, params=bogus).status_code for _ in range(20)} == {400}
    assert listings() - before == 1


class _CountingLock:
    """A lock that counts who has come to take it (holding it or waiting)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.arrivals = 0

    def __enter__(self) -> None:
        self.arrivals += 1
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_a_request_that_comes_while_a_sync_runs_waits_for_it_instead_of_being_refused(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    """A writer's tasks ask in parallel, all telling of the instant it just wrote: the first
    syncs, the others wait for that sync and are answered from it (before, the second found
    a sync begun within the interval, was refused as behind, and fell back to storage)."""
    root = tmp_path / "trips"
    writer = own_table(root, 6)
    handler = ViewHandler(ViewCache(8), ref_ttl=0, sync_interval=60, clock=lambda: 1000.0)
    http.app.state.view_handler = handler
    client = JavaViewClient(http, register(root), root)
    check_against_oracle(client, root)  # built
    (cached,) = handler.cache._tables.values()
    lock = _CountingLock()
    cached.sync_lock = lock  # type: ignore[assignment]
    writer.upsert(rows(range(0, 50, 5), ts=5))
    client.reload()

    inside, release = threading.Event(), threading.Event()
    advance = handler.cache.advance

    def held_advance(*args: Any, **kwargs: Any) -> None:
        inside.set()
        assert release.wait(120)
        advance(*args, **kwargs)

    handler.cache.advance = held_advance  # type: ignore[method-assign]
    statuses: dict[str, int] = {}

    def ask(name: str) -> None:
        statuses[name] = client.raw("slices/partition/latest/", partition="eu").status_code

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    assert inside.wait(120)  # the first request's sync runs, and waits
    second = threading.Thread(target=ask, args=("second",))
    second.start()
    for _ in range(1200):  # the second comes to the sync, or (before) answers at once
        if lock.arrivals == 2 or not second.is_alive():
            break
        time.sleep(0.05)
    release.set()
    first.join(120)
    second.join(120)
    assert statuses == {"first": 200, "second": 200}
    assert requests("synced") >= 1
