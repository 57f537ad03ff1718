"""tms attempts run inside Hudi's Spark (the `HudiSpark` child, whose session carries Hudi's
bundle, as a resident worker's does): the job runner against a stub of the job API, with the
child's session as the attempt's Spark. Called through `HudiSpark.run`."""

from __future__ import annotations

from typing import Any

from tests.jobs.stub_api import OK_BEAT, spec_json, stub_api
from tms.hudi.table import HudiTable
from tms.jobs.client import JobClient
from tms.jobs.runner import JobRunner
from tms.services.hudi.options import session_options

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
    routes = {
        "GET /spec": [(200, spec)],
        "POST /heartbeat": [OK_BEAT],
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
