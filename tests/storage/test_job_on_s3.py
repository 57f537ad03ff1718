"""A table on S3 reached only through its per-table storage options: no `AWS_*` variable in the
service's environment nor its jobs'. The service runs as users run it (`tms serve`), its
scheduler launches a real spark-submit job, and the job gets the options from its spec."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Services, services
from tests.storage.conftest import SECRET_KEY, S3Endpoint
from tests.storage.test_tables_on_s3 import oracle_rows
from tests.storage.test_write_and_compact_on_s3 import log_files, written_table

__all__ = ["services"]  # the e2e fixture, here next to the S3 server's

_SAMPLE = re.compile(r"^tms_storage_requests_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)


def register_with_options(service: Any, base: str, options: dict[str, Any], **fields: Any) -> Any:
    """Register `lake.trips` at `base` with its storage options (as an admin)."""
    body = {"db_name": "lake", "table_name": "trips", "base_path": base}
    return service.post("/v1/tables", {**body, "storage_options": options, **fields})


def storage_requests(metrics: str, table: str, action: str) -> dict[str, float]:
    """`tms_storage_requests_total` of one table and action, by kind."""
    found: dict[str, float] = {}
    for sample in _SAMPLE.finditer(metrics):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', sample["labels"]))
        if labels.get("table") == table and labels.get("action") == action:
            found[labels["kind"]] = float(sample["value"])
    return found


@pytest.mark.spark
def test_a_job_compacts_a_table_on_s3_with_the_tables_own_options(
    s3: S3Endpoint, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = s3.base_path("options")
    written_table(base, table_version=8)
    before = oracle_rows(base, s3.hudi_rs_options)
    for name in s3.environment:
        monkeypatch.delenv(name)  # from here on, only the table's options reach S3

    service = services.start("a")
    table = register_with_options(service, base, s3.storage_options)
    assert table["table_type"] == "MERGE_ON_READ"  # read from S3 with the options
    assert table["storage_options"] == ["endpoint_url", "key", "secret"]
    submitted = service.post(
        "/v1/hoodie/service/compact/submit", {"db_name": "lake", "table_name": "trips"}
    )
    operation = service.wait_terminal(submitted["id"], timeout=240)

    assert operation["status"] == "COMPLETED", operation
    assert oracle_rows(base, s3.hudi_rs_options).equals(before)
    assert log_files(base, s3.hudi_rs_options) == []
    (attempt,) = service.attempts(submitted["id"])
    reported = attempt["figures"]["storage_requests"]
    assert reported["GET"] > 0 and reported["PUT"] > 0 and reported["LIST"] > 0
    exported = storage_requests(service.http.get("/metrics").text, "lake.trips", "compaction")
    assert exported == {kind: float(n) for kind, n in reported.items()}
    timeline = service.get(f"/v1/tables/{table['id']}/timeline")
    assert any(i["action"] == "commit" for i in timeline["instants"])
    exported = storage_requests(service.http.get("/metrics").text, "lake.trips", "timeline")
    assert exported["GET"] > 0
    for log in [service.server_log, *service.job_logs()]:
        assert SECRET_KEY not in Path(log).read_text(errors="replace"), log
