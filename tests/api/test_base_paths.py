"""Base paths at every entry point: normalized, checked against the allowed schemes and
prefixes, refused with a reason naming the request's field; storage reads bounded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.api.conftest import ADMIN, AUTH_TOKENS, MakeClient, bearer
from tests.api.helpers import callback_payload, instant
from tms.config import SettingsError, load_settings
from tms.serve import free_port
from tms.testing.sample_writer.writer import HudiWriter

if TYPE_CHECKING:
    from starlette.testclient import TestClient

TABLES = "/v1/tables"
RFC43 = "/v1/hoodie/service/register"
CLIENT = "/v1/hoodie/service/compact"
CALLBACK = "/v1/hoodie/service/commit"
KEY = {"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}


def body(base_path: str, name: str = "trips") -> dict[str, Any]:
    return {"db_name": "lake", "table_name": name, "base_path": base_path}


def refused_paths(tmp_path: Path) -> list[tuple[str, str]]:
    """(base path, what the message says) for paths the defaults refuse."""
    regular = tmp_path / "file.txt"
    regular.write_text("not a table")
    return [
        ("../../etc", "not an absolute path"),
        ("data/lake/t", "not an absolute path"),
        ("/", "outside the allowed prefixes"),
        ("/../etc", "climbs above the root"),
        ("/etc", "not a Hudi table"),
        (str(regular), "not a Hudi table"),
        (str(tmp_path), "not a Hudi table"),
        ("zip::file:///tmp/t.zip", "chained URLs"),
        ("simplecache::file:///etc", "chained URLs"),
        ("memory://t", "scheme 'memory' is not allowed"),
        ("ftp://127.0.0.1/t", "scheme 'ftp' is not allowed"),
        ("webhdfs://127.0.0.1:50070/t", "scheme 'webhdfs' is not allowed"),
    ]


@pytest.mark.parametrize("url", [TABLES, RFC43])
def test_registration_refuses_paths_naming_the_field_and_the_reason(
    client: TestClient, tmp_path: Path, url: str
) -> None:
    for base_path, reason in refused_paths(tmp_path):
        response = client.post(url, json=body(base_path))
        assert response.status_code == 422, (base_path, response.text)
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("validation_error", "body.base_path")
        assert reason in error["message"], (base_path, error)
    assert client.get(TABLES).json()["items"] == []


def test_pending_registers_a_table_that_storage_does_not_show_yet(
    client: TestClient, tmp_path: Path
) -> None:
    future = str(tmp_path / "later")
    assert client.post(TABLES, json=body(future)).status_code == 422
    created = client.post(TABLES, params={"pending": True}, json=body(future + "/"))
    assert created.status_code == 201, created.text
    assert created.json()["base_path"] == future
    # pending skips only the hoodie.properties check: the allow-list still holds
    for bad in ("/", "memory://t", "relative"):
        refused = client.post(RFC43, params={"pending": True}, json=body(bad, "x"))
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "body.base_path"


def test_five_spellings_are_one_table(client: TestClient, mor_table: HudiWriter) -> None:
    base = mor_table.table.base_path  # /…/trips
    parent, name = os.path.split(base)
    spellings = [
        f"file://{base}",
        base,
        f"{parent}//{name}/",
        f"{parent}/./{name}",
        f"{parent}/z/../{name}",
    ]
    answers = [client.post(TABLES, json=body(s)) for s in spellings]
    assert [a.status_code for a in answers] == [201, 200, 200, 200, 200]
    assert {a.json()["id"] for a in answers} == {answers[0].json()["id"]}
    assert answers[0].json()["base_path"] == base
    other_name = client.post(RFC43, json=body(f"{parent}//{name}", "copy"))
    assert other_name.status_code == 409
    assert other_name.json()["error"]["code"] == "table_conflict"
    assert len(client.get(TABLES).json()["items"]) == 1


def test_callback_finds_the_table_under_another_spelling(
    client: TestClient, mor_table: HudiWriter
) -> None:
    base = mor_table.table.base_path
    table_id = client.post(TABLES, json=body(base)).json()["id"]
    parent, name = os.path.split(base)
    payload = callback_payload(instant(), base_path=f"{parent}//{name}/")
    response = client.post(CALLBACK, json=payload, headers=KEY)
    assert response.status_code == 200, response.text
    assert (response.json()["table_id"], response.json()["table_registered"]) == (table_id, False)
    assert len(client.get(TABLES).json()["items"]) == 1


def test_callback_refuses_paths_it_may_not_register(client: TestClient) -> None:
    for base_path, reason in [
        ("webhdfs://127.0.0.1:50070/t", "scheme 'webhdfs' is not allowed"),
        ("zip::file:///t.zip", "chained URLs"),
        ("lake/trips", "not an absolute path"),
        ("/", "outside the allowed prefixes"),
    ]:
        payload = callback_payload(instant(), base_path=base_path)
        response = client.post(CALLBACK, json=payload, headers=KEY)
        assert response.status_code == 422, (base_path, response.text)
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("validation_error", "body.basePath")
        assert reason in error["message"]
    assert client.get(TABLES).json()["items"] == []


def test_hudi_client_normalizes_and_refuses_basepath(
    client: TestClient, mor_table: HudiWriter
) -> None:
    base = mor_table.table.base_path
    parent, name = os.path.split(base)
    params = {"basepath": f"file://{parent}/./{name}/", "action": "REGISTER"}
    first = client.get(CLIENT, params=params)
    assert first.status_code == 200, first.text
    again = client.get(CLIENT, params={**params, "basepath": base, "instant": instant()})
    assert again.json()["table_id"] == first.json()["table_id"]
    assert again.json()["table_created"] is False
    assert client.get(f"{TABLES}/{first.json()['table_id']}").json()["base_path"] == base
    refused = client.get(CLIENT, params={"basepath": "ftp://10.0.0.1/t", "action": "REGISTER"})
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "query.basepath"


def test_allowed_prefixes_and_schemes_come_from_the_settings(
    make_client: MakeClient, mor_table: HudiWriter, tmp_path: Path
) -> None:
    client = make_client(allowed_path_prefixes=str(tmp_path / "lake"), allowed_schemes="file")
    inside = client.post(TABLES, params={"pending": True}, json=body(f"{tmp_path}/lake/t"))
    assert inside.status_code == 201, inside.text
    for outside, reason in [
        (mor_table.table.base_path, "outside the allowed prefixes"),
        (f"{tmp_path}/lake/../trips", "outside the allowed prefixes"),
        (f"{tmp_path}/lake2/t", "outside the allowed prefixes"),
        ("s3://bucket/t", "scheme 's3' is not allowed"),
    ]:
        response = client.post(TABLES, params={"pending": True}, json=body(outside, "o"))
        assert response.status_code == 422, (outside, response.text)
        assert reason in response.json()["error"]["message"]


def test_storage_error_texts_stay_in_the_log(
    client: TestClient, mor_table: HudiWriter, caplog: pytest.LogCaptureFixture
) -> None:
    # hdfs:// is allowed, and this machine has no Hadoop client: storage fails, loudly.
    unreadable = body("hdfs://127.0.0.1:1/lake/t")
    response = client.post(TABLES, json=unreadable)
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("storage_error", "body.base_path")
    assert "?pending=true" in error["message"]
    assert "libjvm" not in response.text and "Errno" not in response.text
    assert "libjvm" in caplog.text  # the detail is logged
    assert client.post(TABLES, params={"pending": True}, json=unreadable).status_code == 201

    # A registered table whose hoodie.properties cannot be read: the timeline says so.
    table_id = client.post(TABLES, json=body(mor_table.table.base_path, "t2")).json()["id"]
    properties = Path(mor_table.table.base_path) / ".hoodie" / "hoodie.properties"
    properties.unlink()
    properties.mkdir()
    timeline = client.get(f"{TABLES}/{table_id}/timeline")
    assert timeline.status_code == 404, timeline.text
    assert timeline.json()["error"]["code"] == "not_on_storage"
    assert "Errno" not in timeline.text and "directory" not in timeline.text.lower()


def _release(fifo: Path) -> None:
    """Unblock every reader waiting on `fifo`: they read an empty file."""
    fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # readers are waiting: no ENXIO
    os.close(fd)


def test_hung_storage_times_out_then_the_full_pool_answers_busy(
    make_client: MakeClient, mor_table: HudiWriter, tmp_path: Path
) -> None:
    client = make_client(storage_timeout_seconds=1, storage_threads=1)
    base = mor_table.table.base_path
    table_id = client.post(TABLES, json=body(base)).json()["id"]
    properties = Path(base) / ".hoodie" / "hoodie.properties"
    saved = tmp_path / "hoodie.properties"
    shutil.move(properties, saved)
    os.mkfifo(properties)  # opening it for reading blocks until a writer comes
    try:
        first = client.get(f"{TABLES}/{table_id}/timeline")
        assert first.status_code == 504, first.text
        assert first.json()["error"]["code"] == "storage_timeout"
        # The one storage thread still waits on the FIFO: the next read is refused at once.
        busy = client.post(TABLES, params={"pending": True}, json=body(f"{tmp_path}/x", "x"))
        assert busy.status_code == 503, busy.text
        assert busy.json()["error"]["code"] == "storage_busy"
        assert client.get("/healthz").status_code == 200
    finally:
        _release(properties)
    properties.unlink()
    shutil.move(saved, properties)
    # The released thread gives its slot back: storage reads work again.
    for _ in range(1200):
        response = client.get(f"{TABLES}/{table_id}/timeline")
        if response.status_code != 503:
            break
        time.sleep(0.05)
    assert response.status_code == 200, response.text


REGISTRATIONS = 48


def test_a_hung_storage_does_not_hang_the_service(db_url: str, tmp_path: Path) -> None:
    """48 registrations against a table whose hoodie.properties never answers: each gets
    504 or 503, and the probes still answer; once storage answers, registering works."""
    hung = tmp_path / "hung"
    (hung / ".hoodie").mkdir(parents=True)
    fifo = hung / ".hoodie" / "hoodie.properties"
    os.mkfifo(fifo)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMS_")}
    env |= {
        "TMS_DATABASE_URL": db_url,
        "TMS_DATA_DIR": str(tmp_path / "data"),
        "TMS_MAX_RUNNING_PER_INSTANCE": "0",
        "TMS_STORAGE_TIMEOUT_SECONDS": "2",
        "TMS_STORAGE_THREADS": "4",
    }
    log = (tmp_path / "serve.log").open("wb")
    service = subprocess.Popen(
        [sys.executable, "-m", "tms", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_ready(url, service)

        def register(n: int) -> httpx.Response:
            return httpx.post(f"{url}{TABLES}", json=body(str(hung), f"t{n}"), timeout=120)

        with ThreadPoolExecutor(REGISTRATIONS) as pool:
            sent = [pool.submit(register, n) for n in range(REGISTRATIONS)]
            health = httpx.get(f"{url}/healthz", timeout=30)  # while registrations wait
            ready = httpx.get(f"{url}/readyz", timeout=30)
            answers = [future.result() for future in sent]
        codes = Counter((a.status_code, a.json()["error"]["code"]) for a in answers)
        # The 4 storage threads wait on the FIFO for good: 4 timeouts, the rest refused.
        assert codes == {
            (504, "storage_timeout"): 4,
            (503, "storage_busy"): REGISTRATIONS - 4,
        }, codes
        assert (health.status_code, ready.status_code) == (200, 200)
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        assert httpx.get(f"{url}/readyz", timeout=30).status_code == 200
        assert httpx.get(f"{url}{TABLES}", timeout=30).json()["items"] == []

        _release(fifo)  # the 4 threads read an empty file and give their slots back
        fifo.unlink()
        pending = body(str(tmp_path / "later"), "later")
        for _ in range(1200):
            after = httpx.post(f"{url}{TABLES}?pending=true", json=pending, timeout=30)
            if after.status_code != 503:
                break
            time.sleep(0.05)
        assert after.status_code == 201, after.text
    finally:
        if fifo.exists():
            _release(fifo)
        service.terminate()
        service.wait(timeout=60)
        log.close()


def _wait_ready(url: str, service: subprocess.Popen[bytes]) -> None:
    for _ in range(900):
        assert service.poll() is None, "tms serve exited early"
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("tms serve did not become ready")


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("TMS_ALLOWED_PATH_PREFIXES", "/lake,relative", "not an absolute path"),
        ("TMS_ALLOWED_PATH_PREFIXES", "zip::/lake", "chained URLs"),
        ("TMS_ALLOWED_SCHEMES", "file,s3 a", "not a URL scheme"),
    ],
)
def test_bad_allow_lists_stop_the_service_naming_the_variable(
    variable: str, value: str, says: str
) -> None:
    with pytest.raises(SettingsError, match=variable) as refused:
        load_settings(config_file=False, environ={variable: value})
    assert says in str(refused.value)


def test_allow_lists_are_read_from_the_environment() -> None:
    settings = load_settings(
        config_file=False,
        environ={
            "TMS_ALLOWED_SCHEMES": "FILE, s3",
            "TMS_ALLOWED_PATH_PREFIXES": "/lake/, file:///data//x, s3://b/t/",
        },
    )
    assert settings.allowed_schemes == ["file", "s3"]
    assert settings.allowed_path_prefixes == ["/lake", "/data/x", "s3://b/t"]
    assert load_settings(config_file=False, environ={}).allowed_path_prefixes == ["/"]


# Symlinks: a local base path is judged and stored as the folder it leads to.

SCOPED_KEY = "sales-key-4c1d"


def _lake_with_a_link(tmp_path: Path) -> tuple[Path, Path]:
    """`<lake>/hr/payroll` (a folder) and `<lake>/sales/link`, a symlink to it."""
    payroll = tmp_path / "lake" / "hr" / "payroll"
    payroll.mkdir(parents=True)
    sales = tmp_path / "lake" / "sales"
    sales.mkdir()
    (sales / "link").symlink_to(payroll)
    return payroll, sales / "link"


def test_a_scoped_key_does_not_reach_another_prefix_through_a_symlink(
    make_client: MakeClient, tmp_path: Path
) -> None:
    _, link = _lake_with_a_link(tmp_path)
    client = make_client(
        auth_tokens=AUTH_TOKENS, callback_keys=f"{SCOPED_KEY}@{tmp_path}/lake/sales"
    )
    payload = callback_payload(instant(), base_path=str(link), table_name="payroll")
    refused = client.post(CALLBACK, json=payload, headers={"HUDI-CALLBACK-KEY": SCOPED_KEY})
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("forbidden", "body.basePath")
    assert str(link) in error["message"] and "hr" not in error["message"]  # not where it leads
    assert client.get(TABLES, headers=bearer(ADMIN)).json()["items"] == []
    # The key still covers what lies in its prefix.
    own = callback_payload(instant(), base_path=f"{tmp_path}/lake/sales/t", table_name="t")
    allowed = client.post(CALLBACK, json=own, headers={"HUDI-CALLBACK-KEY": SCOPED_KEY})
    assert allowed.status_code == 200, allowed.text


def test_a_symlink_does_not_lead_outside_the_allowed_prefixes(
    make_client: MakeClient, tmp_path: Path
) -> None:
    _, link = _lake_with_a_link(tmp_path)
    client = make_client(allowed_path_prefixes=f"{tmp_path}/lake/sales")
    for url, field in [(TABLES, "body.base_path"), (RFC43, "body.base_path")]:
        response = client.post(url, params={"pending": True}, json=body(str(link)))
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["field"] == field and "outside the allowed prefixes" in error["message"]
    payload = callback_payload(instant(), base_path=str(link))
    response = client.post(CALLBACK, json=payload, headers=KEY)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "body.basePath"
    client_call = client.get(CLIENT, params={"basepath": str(link), "action": "REGISTER"})
    assert client_call.status_code == 422, client_call.text
    assert client_call.json()["error"]["field"] == "query.basepath"
    assert client.get(TABLES).json()["items"] == []


def test_a_table_reached_through_a_symlink_is_one_row_stored_where_it_leads(
    client: TestClient, tmp_path: Path
) -> None:
    payroll, link = _lake_with_a_link(tmp_path)
    # A writer's callback through the link registers the folder it leads to ...
    through_link = client.post(
        CALLBACK, json=callback_payload(instant(), base_path=str(link)), headers=KEY
    )
    assert through_link.status_code == 200, through_link.text
    table_id = through_link.json()["table_id"]
    assert client.get(f"{TABLES}/{table_id}").json()["base_path"] == str(payroll)
    # ... so registering the real path, or the link again, is that same row.
    for spelling in (str(payroll), f"file://{link}", str(link)):
        same = {**body(spelling), "db_name": "default"}  # as the callback named it
        again = client.post(TABLES, params={"pending": True}, json=same)
        assert again.status_code == 200, (spelling, again.text)
        assert again.json()["id"] == table_id
    other = client.post(TABLES, params={"pending": True}, json=body(str(payroll), "copy"))
    assert other.status_code == 409 and other.json()["error"]["code"] == "table_conflict"
    # Callbacks and Hudi's client find it under either spelling.
    by_path = client.post(
        CALLBACK, json=callback_payload(instant(), base_path=str(payroll)), headers=KEY
    )
    assert (by_path.json()["table_id"], by_path.json()["table_registered"]) == (table_id, False)
    found = client.get(CLIENT, params={"basepath": str(link), "action": "REGISTER"})
    assert found.status_code == 200, found.text
    assert (found.json()["table_id"], found.json()["table_created"]) == (table_id, False)
    assert len(client.get(TABLES).json()["items"]) == 1
