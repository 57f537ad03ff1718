"""A table on the move syncs as often as it moves: a writer's timeline changes several times
a second (an inline compaction is requested, then inflight, then committed), and a client
that tells of each change is synced to at once, as Hudi's server syncs, instead of being
refused until `sync_interval` passes (and falling back to listing storage itself). A bogus
timeline still costs one listing per interval."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from tests.view.conftest import Register, own_table, rows
from tests.view.java_client import JavaViewClient
from tests.view.test_freshness import listings, requests
from tests.view.test_reads import check_against_oracle
from tms.view import ViewCache, ViewService


def test_each_change_a_client_tells_of_is_synced_within_the_interval(
    tmp_path: Path, http: TestClient, register: Register
) -> None:
    root = tmp_path / "trips"
    writer = own_table(root, 6)
    clock = [1000.0]
    service = ViewService(ViewCache(8), ref_ttl=0, sync_interval=60, clock=lambda: clock[0])
    http.app.state.view_service = service
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
