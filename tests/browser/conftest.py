"""The operator console against a real `tms serve` on its embedded database, driven by
Debian's headless Chromium through its chromedriver (Selenium; nothing is downloaded).

`console` starts one service for the module with three role tokens, no policies and no
pull; its scheduler runs (the overview shows its instance) but launches nothing, as every
operation asks for a resident worker (`spark-worker`): nothing happens that the test does
not do. `scenario` writes real Hudi tables with the project's writer, announces their commits by
the commit callback, submits operations, and acts as a resident worker over the worker API
to leave one operation FAILED (with an error and a log) and one RUNNING (its job said how
far it got).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.remote.webdriver import WebDriver

from tests.e2e.conftest import Service
from tests.e2e.writer_callbacks import CALLBACK_PATH, callback_payload
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

ADMIN = "console-admin-5b1e"
WRITER = "console-writer-c27d"
VIEWER = "console-viewer-90fa"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
WORKER_ID = "console-test-worker"
FAILURE = "java.lang.IllegalStateException: executor lost while compacting file group f-2"
NATIVE_DECLINED = "the merge mode CUSTOM is not supported by the native compaction"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def console() -> Iterator[Service]:
    """`tms serve` on the embedded database (no `TMS_DATABASE_URL`) under a fresh data dir,
    outside pytest's base directory: as root the database runs as its own user, and a pytest
    session starting meanwhile makes that base directory private again."""
    root = Path(tempfile.mkdtemp(prefix="tms-console-"))
    settings = {
        "auth_tokens": f"admin:{ADMIN},writer:{WRITER},viewer:{VIEWER}",
        "max_running_per_instance": "1",
        "lease_seconds": "600",
        "compaction_delta_commits": "0",
        "clean_commits": "0",
        "pull_listings_per_minute": "0",
        "scheduler_interval_seconds": "0.5",
    }
    service = Service("console", "", root / "data", settings)
    service.env.pop("TMS_DATABASE_URL")
    service.http.headers.update(bearer(ADMIN))
    try:
        service.start()
        yield service
    finally:
        service.close()
        shutil.rmtree(root, ignore_errors=True)


def batch(ids: range, ts: int, regions: tuple[str, ...]) -> pa.Table:
    items = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in items]),
            "ts": pa.array([ts] * len(items), pa.int64()),
            "fare": pa.array([float(i) * 1.5 for i in items]),
            "region": pa.array([regions[i % len(regions)] for i in items]),
        }
    )


def write_table(
    console: Service, root: Path, db: str, name: str, table_type: str, upserts: int
) -> tuple[int, HudiWriter]:
    """A real table (partitioned by region) with an insert and `upserts` upserts, each
    commit announced by the callback as a Hudi writer does; registered first."""
    table = create_table(
        str(root / name),
        name,
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["region"],
        extra_properties={"hoodie.database.name": db},
    )
    registered = console.post(
        "/v1/tables", {"db_name": db, "table_name": name, "base_path": table.base_path}
    )
    writer = HudiWriter(table)
    regions = ("eu", "us", "apac")
    instants = [writer.insert(batch(range(30), 1, regions))]
    instants += [writer.upsert(batch(range(0, 30, 3), 2 + n, regions)) for n in range(upserts)]
    for instant in instants:
        payload = callback_payload(table.base_path, name, instant)
        response = console.http.post(CALLBACK_PATH, json=payload, headers=bearer(WRITER))
        assert response.status_code == 200, response.text
    return int(registered["id"]), writer


@dataclass(frozen=True)
class Scenario:
    trips_id: int
    failed_id: int
    running_id: int
    failed_attempt_id: int


def _claim(console: Service, log_dir: Path) -> dict[str, Any]:
    answer = console.post(
        f"/v1/workers/{WORKER_ID}/claim",
        {"free": 1, "busy": 0, "wait_seconds": 5, "log_dir": str(log_dir)},
    )
    assert len(answer["attempts"]) == 1, answer
    claimed: dict[str, Any] = answer["attempts"][0]
    return claimed


@pytest.fixture(scope="module")
def scenario(console: Service) -> Scenario:
    root = console.data_dir.parent / "lake"
    trips_id, _ = write_table(console, root, "lake", "trips", "MERGE_ON_READ", upserts=3)
    write_table(console, root, "lake", "rides", "MERGE_ON_READ", upserts=1)
    write_table(console, root, "sales", "orders", "COPY_ON_WRITE", upserts=0)
    for action in ("compact", "clean"):
        body = {
            "db_name": "lake",
            "table_name": "trips",
            "max_retries": 0,
            "execution_engine": "spark-worker",
        }
        console.post(f"/v1/hoodie/service/{action}/submit", body)
    console.post(
        "/v1/workers",
        {
            "id": WORKER_ID,
            "host": "console-test",
            "pid": os.getpid(),
            "spark_master": "local[1]",
            "queues": ["default"],
            "slots": 2,
        },
    )
    log_dir = console.log_dir / "worker"
    first = _claim(console, log_dir)
    log = log_dir / str(first["operation_id"]) / f"{first['attempt_id']}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"compaction of lake.trips starting\n{FAILURE}\n")
    result = httpx.post(
        f"{console.url}/v1/jobs/attempts/{first['attempt_id']}/result",
        json={
            "outcome": "FAILED",
            "error": FAILURE,
            "retryable": True,
            "figures": {"executor": "hudi", "native_declined": NATIVE_DECLINED},
        },
        headers=bearer(first["token"]),
    )
    assert result.status_code == 200, result.text
    assert result.json()["operation_status"] == "FAILED"
    second = _claim(console, log_dir)
    assert console.operation(second["operation_id"])["status"] == "RUNNING"
    progress = {"stage": "cleaning", "file_groups_done": 1, "file_groups_planned": 3}
    beat = httpx.post(
        f"{console.url}/v1/jobs/attempts/{second['attempt_id']}/heartbeat",
        json={"progress": progress},
        headers=bearer(second["token"]),
    )
    assert beat.status_code == 200, beat.text
    return Scenario(
        trips_id=trips_id,
        failed_id=int(first["operation_id"]),
        running_id=int(second["operation_id"]),
        failed_attempt_id=int(first["attempt_id"]),
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """Headless Chromium from Debian's packages (`.ci/run` installs them when missing)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not found: install Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver), or deselect with -m 'not browser'"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1440,1000",
        "--force-device-scale-factor=1",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=ChromeService(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
