"""Table features only Hudi's own code makes, made in Hudi's Spark (called through
`HudiSpark.run`): an expression index by Hudi's SQL, a log compaction by Hudi's write client."""

from __future__ import annotations

from typing import Any

from tms.hudi.table import HudiTable
from tms.services.apache_hudi.procedures import write_client

EXPRESSION_INDEX = "ts_day"
"""The expression index `create_expression_index` makes: `expr_index_ts_day` in the metadata
table."""

LOCK_PROVIDER = "hoodie.write.lock.provider"
IN_PROCESS_LOCK = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"


def create_expression_index(spark: Any, base_path: str, options: dict[str, str]) -> None:
    """An expression index over the day of `ts` (epoch milliseconds), by Hudi's `CREATE INDEX`
    on the table registered in the session's catalog by its location."""
    name = f"features_{abs(hash(base_path))}"
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING hudi LOCATION '{base_path}'")
    spark.conf.set(LOCK_PROVIDER, IN_PROCESS_LOCK)  # Hudi builds the index asynchronously
    try:
        spark.sql(
            f"CREATE INDEX {EXPRESSION_INDEX} ON {name} USING column_stats(ts) "
            "OPTIONS(expr='from_unixtime', format='yyyyMMdd')"
        )
    finally:
        spark.conf.unset(LOCK_PROVIDER)


def log_compact(spark: Any, base_path: str, options: dict[str, str]) -> str:
    """Schedule and run a log compaction of the table with Hudi's write client and the
    writer's `options` (every file slice with a log file is due); the instant it completed."""
    configs = {**options, "hoodie.log.compaction.blocks.threshold": "1"}
    empty = spark._jvm.org.apache.hudi.common.util.Option.empty()
    with write_client(spark, base_path, configs) as client:
        scheduled = client.scheduleLogCompaction(empty)
        if not scheduled.isPresent():
            raise AssertionError("Hudi scheduled no log compaction")
        instant = str(scheduled.get())
        client.logCompact(instant, True)  # and complete it
        completed = HudiTable.open(base_path).timeline().completed()
        if not any(done.requested_time == instant for done in completed):
            raise AssertionError(f"Hudi left log compaction {instant} pending")
        return instant
