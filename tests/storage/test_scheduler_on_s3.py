"""Issue 13's end-to-end test: a real Hudi 1.1 merge-on-read table, copied into an S3 bucket,
registered with its storage options (no `AWS_*` variable anywhere), updated by a writer that
sends Hudi's commit callback; the scheduler compacts it (by policy), clusters it, cleans it and
builds its metadata table (`index` of `files`) with real Spark jobs. hudi-rs reads the same
rows from the same endpoint after each, and the table copied back to disk passes the metadata
table checks the local tests make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.e2e.conftest import Services, services
from tests.hudi.test_fixture_views import unzip_fixture
from tests.services.test_index_files import assert_files_true
from tests.storage.conftest import S3Endpoint, upload
from tests.storage.test_job_on_s3 import register_with_options
from tests.storage.test_tables_on_s3 import oracle_rows
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.testing.sample_writer.writer import HudiWriter

__all__ = ["services"]  # the e2e fixture, here next to the S3 server's

FIXTURE = "mor_avro_v9_txns_simple_nometa"
CALLBACK_HEADERS = {"HUDI-CALLBACK-KEY": "hudi_write_commit_http_callback"}


def callback(base: str, options: dict[str, Any], instant: str) -> dict[str, Any]:
    """Hudi's commit callback message of a completed instant, its write stats read from S3."""
    table = HudiTable.open(base, options)
    found = table.timeline().get(instant)
    assert found is not None and found.is_completed
    stats = table.timeline().commit_metadata(found).write_stats()
    return {
        "commitTime": instant,
        "tableName": "trips",
        "basePath": base,
        "hoodieWriteStat": [stat.to_json_dict() for stat in stats],
        "commitActionType": {"present": True},
        "extraMetadata": {"present": True},
    }


def download(base: str, options: dict[str, Any], into: Path) -> Path:
    storage = Storage(base, storage_options=options)
    storage.fs.get(f"{storage.root}/", f"{into}/", recursive=True)
    return into


def update_every_row(s3: S3Endpoint, base: str) -> str:
    """A writer's upsert of every row (a new `txn_metadata`, a later `txn_ts`): log files."""
    table = HudiTable.open(base, s3.storage_options)
    current = oracle_rows(base, s3.hudi_rs_options)
    data = current.select([c for c in current.column_names if not c.startswith("_hoodie")])
    data = data.set_column(
        data.schema.get_field_index("txn_metadata"),
        "txn_metadata",
        pa.array(["updated"] * data.num_rows),
    )
    data = data.set_column(
        data.schema.get_field_index("txn_ts"),
        "txn_ts",
        pa.compute.add(data.column("txn_ts"), 1),
    )
    return HudiWriter(table).upsert(data)


@pytest.mark.spark
def test_the_scheduler_services_a_table_on_s3(
    s3: S3Endpoint, services: Services, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    base = upload(unzip_fixture(FIXTURE, tmp_path / "fixture"), s3, "scheduled")
    options = s3.storage_options
    instant = update_every_row(s3, base)
    expected = oracle_rows(base, s3.hudi_rs_options)
    assert set(expected.column("txn_metadata").to_pylist()) == {"updated"}
    for name in s3.environment:
        monkeypatch.delenv(name)  # only the table's own options reach S3 from here on

    service = services.start("a")
    table = register_with_options(
        service,
        base,
        options,
        enabled_actions=["compaction"],
        policy={"compaction_delta_commits": 1},
    )
    answer = service.http.post(
        "/v1/hoodie/service/commit",
        json=callback(base, options, instant),
        headers=CALLBACK_HEADERS,
    )
    assert answer.status_code == 200, answer.text
    [compaction] = answer.json()["operations_created"]
    done = [service.wait_terminal(compaction, timeout=240)]
    assert oracle_rows(base, s3.hudi_rs_options).equals(expected)
    key = {"db_name": "lake", "table_name": "trips"}
    for segment, extra in (
        ("cluster", {}),
        ("clean", {"retained": "1"}),
        ("index", {"partitions": "files"}),
    ):
        body = {**key, "extra_params": extra}
        submitted = service.post(f"/v1/hoodie/service/{segment}/submit", body)
        done.append(service.wait_terminal(submitted["id"], timeout=240))
        assert oracle_rows(base, s3.hudi_rs_options).equals(expected)

    assert [(o["action"], o["status"]) for o in done] == [
        ("compaction", "COMPLETED"),
        ("clustering", "COMPLETED"),
        ("clean", "COMPLETED"),
        ("indexing", "COMPLETED"),
    ], [o["last_error"] for o in done]
    figures = [service.attempts(o["id"])[-1]["figures"] for o in done]
    assert figures[0]["log_files_compacted"] > 0 and figures[0]["files_written"] > 0
    assert figures[1]["files_written"] > 0 and figures[2]["files_deleted"] > 0
    assert all(f["storage_requests"]["PUT"] > 0 for f in figures), figures
    timeline = service.get(f"/v1/tables/{table['id']}/timeline")["instants"]
    assert {o["instant"] for o in done} <= {i["instant"] for i in timeline}
    copied = download(base, options, tmp_path / "copied")
    checks = tmp_path / "checks"
    checks.mkdir()
    assert_files_true(copied, checks)
