"""A flaky object store: every storage call, the pull, the callback's probe, the view's
listing, markers and a compaction through a proxy that fails a share of the requests (500,
503 SlowDown, resets, stalls past the read timeout, cut-short bodies). Calls safe to repeat
are retried; a conditional create is never taken for another writer's; the table reads the
same afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from bench.fault_proxy import FAULT_KINDS, FaultProxy
from botocore.exceptions import ClientError, ReadTimeoutError

from tests.api.conftest import CALLBACK_KEY, client, make_client
from tests.markers.conftest import BASE as MARKER_ROUTES
from tests.markers.conftest import Serve, serve
from tests.storage.conftest import S3Endpoint, spark_environment
from tests.storage.test_table_options import add
from tests.storage.test_tables_on_s3 import oracle_rows
from tests.storage.test_write_and_compact_on_s3 import written_table
from tests.view.java_client import HEADERS, client_hash
from tms.blocking_calls import BlockingCalls
from tms.hudi.files import timeline_markers
from tms.hudi.files.markers import list_markers
from tms.hudi.storage import Storage
from tms.hudi.storage.requests import RequestKind
from tms.hudi.storage.retry import (
    RETRIED,
    RetryPolicy,
    StorageUnavailableError,
    call_with_retries,
    is_transient,
)
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import request, transition
from tms.ingest.probe import TableProbe
from tms.markers.state import MarkerDirState
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.view.listing import list_table

if TYPE_CHECKING:
    from starlette.testclient import TestClient

__all__ = ["client", "make_client", "serve"]  # the API's fixtures, next to the S3 server's

RETRY_ENVIRONMENT = {
    "TMS_STORAGE_RETRIES": "8",
    "TMS_STORAGE_RETRY_BASE_SECONDS": "0.02",
    "TMS_STORAGE_RETRY_MAX_SECONDS": "0.5",
    "TMS_STORAGE_READ_TIMEOUT_SECONDS": "1.0",
}
"""Short waits so a test runs quickly; stalls (2 s) outlast the read timeout."""


@dataclass
class Flaky:
    proxy: FaultProxy
    s3: S3Endpoint

    @property
    def options(self) -> dict[str, Any]:
        return {**self.s3.storage_options, "endpoint_url": self.proxy.url}

    def storage(self, base_path: str) -> Storage:
        return Storage(base_path, storage_options=self.options)


@pytest.fixture
def flaky(s3: S3Endpoint, monkeypatch: pytest.MonkeyPatch) -> Iterator[Flaky]:
    for name, value in RETRY_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    proxy = FaultProxy(s3.url, rate=0.2, stall_seconds=2.0, seed=32).start()
    yield Flaky(proxy, s3)
    proxy.stop()


def client_error(status: int, code: str) -> ClientError:
    response: Any = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "GetObject")


def test_passing_failures_are_told_from_lasting_ones() -> None:
    translated = OSError(121, "We encountered an internal error")
    translated.__cause__ = client_error(500, "InternalError")
    assert is_transient(translated)
    assert is_transient(client_error(503, "SlowDown"))
    assert is_transient(ReadTimeoutError(endpoint_url="http://store"))
    assert is_transient(ConnectionResetError())
    assert not is_transient(client_error(404, "NoSuchKey"))
    assert not is_transient(client_error(403, "AccessDenied"))
    assert not is_transient(FileNotFoundError("x"))
    assert not is_transient(ValueError("x"))


def test_retries_wait_with_full_jitter_and_stop_after_the_last_try() -> None:
    retry = RetryPolicy(attempts=4, base_seconds=1.0, max_seconds=3.0)
    waits: list[float] = []
    calls = 0

    def failing() -> None:
        nonlocal calls
        calls += 1
        raise client_error(503, "SlowDown")

    before = RETRIED[RequestKind.GET]
    with pytest.raises(StorageUnavailableError) as given_up:
        call_with_retries(RequestKind.GET, failing, retry, sleep=waits.append)
    assert isinstance(given_up.value, OSError), "callers that catch OSError see it"
    assert isinstance(given_up.value.__cause__, ClientError)
    assert calls == 4 and len(waits) == 3
    assert all(0 <= w <= c for w, c in zip(waits, (1.0, 2.0, 3.0), strict=True))
    assert RETRIED[RequestKind.GET] == before + 3
    assert RetryPolicy.from_environment({"TMS_STORAGE_RETRIES": "0"}).attempts == 1

    def lasting() -> None:
        nonlocal calls
        calls += 1
        raise FileNotFoundError("gone")

    calls = 0
    with pytest.raises(FileNotFoundError):
        call_with_retries(RequestKind.GET, lasting, retry, sleep=waits.append)
    assert calls == 1


def test_every_storage_call_gets_through_a_store_failing_a_fifth_of_requests(
    flaky: Flaky,
) -> None:
    storage = flaky.storage(flaky.s3.base_path("flaky-calls"))
    retried_before = RETRIED.total
    for i in range(15):
        data = bytes([i]) * (1000 + i)
        storage.write_bytes(f"a/{i}", data)
        assert storage.read_bytes(f"a/{i}") == data
        assert storage.read_tail(f"a/{i}", 10) == data[-10:]
        storage.create_new(f"c/{i}", b"mine")
        with pytest.raises(FileExistsError):
            storage.create_new(f"c/{i}", b"another writer's")
        assert storage.exists(f"a/{i}")
        assert len(storage.list_dir("a")) == i + 1
        storage.touch(f"h/{i}")
        assert storage.delete(f"h/{i}")
    storage.delete_dir("c")
    assert [f.path for f in storage.walk_files("c")] == []
    faults = flaky.proxy.faults()
    assert set(faults) == {"500", "503", "reset", "stall", "truncate"}, faults
    assert RETRIED.total > retried_before


def test_the_pull_the_probe_and_the_views_listing_read_what_the_store_holds(
    flaky: Flaky,
) -> None:
    flaky.proxy.set_rate(0.0)
    base = flaky.s3.base_path("flaky-reads")
    written_table(base, table_version=8)
    direct = HudiTable.open(base, storage_options=flaky.s3.storage_options).timeline()
    listed = list_table(Storage(base, storage_options=flaky.s3.storage_options))
    flaky.proxy.set_rate(0.2)
    for _ in range(5):
        pulled = HudiTable.open(base, storage_options=flaky.options).timeline()
        assert [i.requested_time for i in pulled.instants] == [
            i.requested_time for i in direct.instants
        ]
        last = direct.instants[-1]
        assert TableProbe(base, flaky.options).action_of(last.requested_time) == last.action
        assert list_table(flaky.storage(base)) == listed
    assert sum(flaky.proxy.faults().values()) > 0


def test_markers_created_through_a_flaky_store_are_all_on_it(flaky: Flaky) -> None:
    instant = "20260101120000000"
    storage = flaky.storage(flaky.s3.base_path("flaky-markers"))
    calls = BlockingCalls("tms-storage", threads=2, timeout=60.0)
    state = MarkerDirState(storage, instant, files=2, interval_seconds=0, storage_calls=calls)
    state.load()
    names = [f"city=sf/{i:08d}-0_0-1-0_{instant}.parquet.marker.CREATE" for i in range(60)]

    async def create() -> list[bool]:
        answers: list[bool] = []
        for start in range(0, len(names), 10):
            answers += await asyncio.gather(*(state.create(n) for n in names[start : start + 10]))
        return answers

    assert asyncio.run(create()) == [True] * len(names)
    direct = Storage(storage.base_path, storage_options=flaky.s3.storage_options)
    on_store = timeline_markers.read_marker_files(direct, instant)
    assert sorted(n for found in on_store.values() for n in found) == sorted(names)


@pytest.mark.parametrize("retries", [8, 1])
def test_markers_created_over_the_routes_through_a_flaky_store_are_all_on_it(
    serve: Serve, flaky: Flaky, monkeypatch: pytest.MonkeyPatch, retries: int
) -> None:
    """Hudi's writer calls `/v1/hoodie/marker/create` for a registered table on S3, a fifth of
    the store's requests failing: every answer is the marker's (true) or a clean 5xx naming
    no storage detail, which the writer sends again; once each marker got an answer, the
    server and storage (read past the proxy) hold every one. With one try per
    storage call, failures reach the writer; with eight, the retries absorb them."""
    monkeypatch.setenv("TMS_STORAGE_RETRIES", str(retries))
    instant = "20260101120000000"
    base = flaky.s3.base_path("flaky-marker-routes")
    flaky.proxy.set_rate(0.0)
    written_table(base, table_version=9)
    hudi = HudiTable.open(base, flaky.s3.storage_options)
    transition(
        hudi.storage,
        hudi.config,
        request(hudi.storage, hudi.config, instant, Action.DELTA_COMMIT),
        State.INFLIGHT,
    )
    marker_dir = f"{base}/.hoodie/.temp/{instant}"
    names = [f"sf/{i:08d}-0_0-1-0_{instant}.parquet.marker.CREATE" for i in range(40)]
    refused: dict[int, int] = {}
    with serve() as client:
        assert add(client, flaky.options, base_path=base).status_code == 201
        flaky.proxy.set_rate(0.2)
        for name in names:
            answers = []
            while not answers or answers[-1].status_code != 200:
                assert len(answers) < 20, [a.text for a in answers]
                answers.append(
                    client.post(
                        f"{MARKER_ROUTES}/create",
                        params={"markerdirpath": marker_dir, "markername": name},
                    )
                )
            for failed in answers[:-1]:
                refused[failed.status_code] = refused.get(failed.status_code, 0) + 1
                assert failed.json()["error"]["code"].startswith("storage_"), failed.text
                assert "SlowDown" not in failed.text and "InternalError" not in failed.text
            # a try the store took before its answer was lost reads as "exists" when sent again
            assert answers[-1].json() is True or len(answers) > 1, answers[-1].text
        listed = client.get(f"{MARKER_ROUTES}/all", params={"markerdirpath": marker_dir})
        flaky.proxy.set_rate(0.0)
        assert listed.status_code == 200, listed.text
        assert sorted(listed.json()) == sorted(names)
    direct = Storage(base, storage_options=flaky.s3.storage_options)
    on_store = timeline_markers.read_marker_files(direct, instant)
    # as Hudi's `MarkerUtils` reads them: the lines of every file, as one set
    assert {n for found in on_store.values() for n in found} == set(names)
    listed = [m.name for m in list_markers(direct, instant)]
    assert sorted(listed) == sorted(names), "a rollback sees each marker once"
    assert sum(flaky.proxy.faults().values()) > 0
    print(f"refused and sent again: {refused}; faults: {flaky.proxy.faults()}")
    assert bool(refused) == (retries == 1), refused


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_a_store_failing_every_request_gets_clean_answers_on_the_open_routes(
    serve: Serve, flaky: Flaky, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Every request failing one way, one try per call: the commit callback, a marker create
    and the view answer a 5xx naming the storage problem by code, no 500 and no text of the
    store's or its library's; with the store back, the same requests are served."""
    instant = "20260101120000000"
    base = flaky.s3.base_path(f"flaky-always-{kind}")
    flaky.proxy.set_rate(0.0)
    written_table(base, table_version=9)
    hudi = HudiTable.open(base, flaky.s3.storage_options)
    requested = request(hudi.storage, hudi.config, instant, Action.DELTA_COMMIT)
    transition(hudi.storage, hudi.config, requested, State.INFLIGHT)
    latest = hudi.timeline().completed()[-1]
    monkeypatch.setenv("TMS_STORAGE_RETRIES", "0")
    marker = {
        "markerdirpath": f"{base}/.hoodie/.temp/{instant}",
        "markername": f"sf/00000001-0_0-1-0_{instant}.parquet.marker.CREATE",
    }
    callback = {"basePath": base, "tableName": "trips", "commitTime": latest.requested_time}
    known = [(i.requested_time, str(i.action), "COMPLETED") for i in hudi.timeline().completed()]
    view = {
        "basepath": base,
        "partition": "sf",
        "lastinstantts": latest.requested_time,
        "timelinehash": client_hash(known),
    }

    def ask(client: TestClient) -> list[Any]:
        return [
            client.post(
                "/v1/hoodie/service/commit",
                json=callback,
                headers={"HUDI-CALLBACK-KEY": CALLBACK_KEY},
            ),
            client.post(f"{MARKER_ROUTES}/create", params=marker),
            client.get("/v1/hoodie/view/slices/partition/latest/", params=view, headers=HEADERS),
        ]

    with serve(storage_timeout_seconds=10) as client:
        assert add(client, flaky.options, base_path=base).status_code == 201
        flaky.proxy.kinds = (kind,)
        flaky.proxy.set_rate(1.0)
        for answer in ask(client):
            assert answer.status_code in (502, 503, 504), answer.text
            assert answer.json()["error"]["code"].startswith("storage_"), answer.text
            for detail in ("SlowDown", "InternalError", "Errno", "Error:", "127.0.0.1", "lake/"):
                assert detail not in answer.text, answer.text
        flaky.proxy.set_rate(0.0)
        callback_answer, created, slices = ask(client)
    assert callback_answer.status_code == 200, callback_answer.text
    assert callback_answer.json()["action"] == latest.action
    assert (created.status_code, created.json()) == (200, True), created.text
    assert slices.status_code == 200 and slices.json(), slices.text


def test_callbacks_and_view_requests_answer_right_through_a_flaky_store(
    client: TestClient, flaky: Flaky
) -> None:
    """A table registered with options that reach the store through the proxy: every commit
    callback that must read the timeline is acknowledged with the right action, and the
    timeline server's view answers as it does with no faults."""
    base = flaky.s3.base_path("flaky-api")
    flaky.proxy.set_rate(0.0)
    written_table(base, table_version=9)
    assert add(client, flaky.options, base_path=base).status_code == 201
    instants = HudiTable.open(base, flaky.options).timeline().completed()
    known = [(i.requested_time, str(i.action), "COMPLETED") for i in instants]
    view = {
        "basepath": base,
        "partition": "sf",
        "lastinstantts": instants[-1].requested_time,
        "timelinehash": client_hash(known),
    }
    expected = client.get("/v1/hoodie/view/slices/partition/latest/", params=view, headers=HEADERS)
    assert expected.status_code == 200, expected.text
    flaky.proxy.set_rate(0.2)
    for instant in instants * 3:
        answer = client.post(
            "/v1/hoodie/service/commit",
            json={"basePath": base, "tableName": "trips", "commitTime": instant.requested_time},
            headers={"HUDI-CALLBACK-KEY": CALLBACK_KEY},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["action"] == instant.action
        slices = client.get(
            "/v1/hoodie/view/slices/partition/latest/", params=view, headers=HEADERS
        )
        assert slices.status_code == 200, slices.text
        assert slices.json() == expected.json()
    assert sum(flaky.proxy.faults().values()) > 0


def test_a_callback_whose_action_storage_cannot_give_is_refused_not_acknowledged(
    client: TestClient, flaky: Flaky, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every try failing: 503 `storage_unavailable` and nothing stored, so the writer's retry
    (or the pull) brings the commit in with its action; never acknowledged without it."""
    base = flaky.s3.base_path("flaky-refused")
    flaky.proxy.set_rate(0.0)
    written_table(base, table_version=9)
    assert add(client, flaky.options, base_path=base).status_code == 201
    latest = HudiTable.open(base, flaky.options).timeline().completed()[-1]
    body = {"basePath": base, "tableName": "trips", "commitTime": latest.requested_time}
    headers = {"HUDI-CALLBACK-KEY": CALLBACK_KEY}
    monkeypatch.setenv("TMS_STORAGE_RETRIES", "1")
    flaky.proxy.kinds = ("500",)
    flaky.proxy.set_rate(1.0)
    refused = client.post("/v1/hoodie/service/commit", json=body, headers=headers)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "storage_unavailable"
    flaky.proxy.set_rate(0.0)
    answer = client.post("/v1/hoodie/service/commit", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert (answer.json()["action"], answer.json()["new"]) == ("deltacommit", True)


@pytest.mark.spark
def test_a_compaction_through_a_flaky_store_keeps_the_tables_rows(
    spark: Any, flaky: Flaky, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver and the Spark tasks both go through the proxy (5 % of requests fail)."""
    base = flaky.s3.base_path("flaky-compaction")
    written_table(base, table_version=8)
    before = oracle_rows(base, flaky.s3.hudi_rs_options)
    flaky.proxy.set_rate(0.05)
    monkeypatch.setenv("AWS_ENDPOINT_URL", flaky.proxy.url)
    spark_environment(spark, flaky.s3)
    spark.sparkContext.environment.update(
        {**RETRY_ENVIRONMENT, "AWS_ENDPOINT_URL": flaky.proxy.url}
    )
    try:
        instant = schedule_compaction(HudiTable.open(base))
        assert instant is not None
        execute_compaction(spark, HudiTable.open(base), instant)
    finally:
        for name in RETRY_ENVIRONMENT:
            spark.sparkContext.environment.pop(name, None)
        spark_environment(spark, flaky.s3)
    flaky.proxy.set_rate(0.0)
    assert oracle_rows(base, flaky.s3.hudi_rs_options).equals(before)
    completed = HudiTable.open(base).timeline().get(instant)
    assert completed is not None and completed.is_completed
    assert sum(flaky.proxy.faults().values()) > 0
