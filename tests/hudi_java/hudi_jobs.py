"""tms attempts run inside Hudi's Spark (the `HudiSpark` child, whose session carries Hudi's
bundle, as a resident worker's does): the job runner against a stub of the job API, with the
child's session as the attempt's Spark. Called through `HudiSpark.run`."""

from __future__ import annotations

from typing import Any

from tests.jobs.stub_api import OK_BEAT, spec_json, stub_api
from tms.hudi.table import HudiTable
from tms.jobs.client import JobClient
from tms.jobs.runner import JobRunner
from tms.services.apache_hudi.executor import HUDI_STAGE
from tms.services.apache_hudi.options import session_options

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)


def run_attempt(spark: Any, base_path: str, action: str, fields: dict[str, Any]) -> dict[str, Any]:
    """One attempt of `action` on the table; the exit code and the result it reported."""
    spec = spec_json(base_path=base_path, action=action, **fields)
    return _attempt(spark, spec, [OK_BEAT])


def run_cancelled_attempt(
    spark: Any, base_path: str, action: str, fields: dict[str, Any]
) -> dict[str, Any]:
    """One attempt whose operation is cancelled once Hudi's code runs: every heartbeat from
    the stage of Hudi's table service on answers `cancel_requested`. The exit code, the
    result it reported, and whether a beat carried the cancel."""
    spec = spec_json(base_path=base_path, action=action, heartbeat_interval_seconds=0.2, **fields)
    cancels: list[Any] = []

    def beat(body: Any) -> Any:
        if ((body or {}).get("progress") or {}).get("stage") == HUDI_STAGE:
            cancels.append(body)
            return 200, {**OK_BEAT[1], "cancel_requested": True}
        return OK_BEAT

    return {**_attempt(spark, spec, beat), "cancelled": bool(cancels)}


def _attempt(spark: Any, spec: dict[str, Any], beats: Any) -> dict[str, Any]:
    """The job runner against a stub of the job API whose heartbeats answer `beats`."""
    routes = {
        "GET /spec": [(200, spec)],
        "POST /heartbeat": beats,
        "POST /instant": [(200, {})],
        "POST /result": [(200, {})],
    }
    with stub_api(routes) as api, JobClient(api.url, 5, "tok") as client:
        runner = JobRunner(client, spark_factory=lambda s, i: spark, owns_spark=False)
        code = runner.run()
        results = api.calls("POST /result")
    return {"code": code, "result": results[-1] if results else None}


def rewrite_some(spark: Any, base_path: str, rows: int) -> None:
    """Upsert `rows` of the table's own rows again (same keys and values): new log files
    (merge-on-read) or base file versions (copy-on-write), the rows unchanged. Hudi's writer
    with the table's own configs."""
    frame = spark.read.format("hudi").load(base_path)
    name = frame.select("_hoodie_partition_path").limit(1).collect()
    if not name:
        return
    data = frame.drop(*META_COLUMNS).limit(rows)
    table = HudiTable.open(base_path)
    config = table.config
    options = {
        **session_options(table),  # keeps each metadata partition the table has, no more
        "hoodie.table.name": config.table_name,
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.write.table.version": str(config.table_version),
        "hoodie.write.auto.upgrade": "false",
        "hoodie.parquet.small.file.limit": "0",
    }
    data.write.format("hudi").options(**options).mode("append").save(base_path)
