"""Which engine runs an operation: the one it asks for (its own `engine`, else its table
policy's `execution_engine`, else `spark`: a resident worker when one serves its queue, else
spark-submit), and why a worker that could have had it did not (`engine_note`, kept on the
attempt the scheduler claimed for spark-submit)."""

from __future__ import annotations

from collections.abc import Sequence

from tms.store import SPARK_SUBMIT, Operation, Tbl

__all__ = ["asked_engine", "engine_note"]


def asked_engine(operation: Operation, table: Tbl) -> str:
    """The engine the operation asks for: its own, else its table's, else `spark` (either
    engine: a worker when one serves its queue)."""
    own = (operation.engine or "spark").strip().lower()
    if own != "spark":
        return own
    return str((table.policy or {}).get("execution_engine") or "spark").strip().lower()


def engine_note(operation: Operation, table: Tbl, worker_queues: Sequence[str]) -> str | None:
    """Why an operation the scheduler claimed for spark-submit did not go to a worker that
    could have had it (a worker serves its queue, or it asked for one); None otherwise."""
    asked = asked_engine(operation, table)
    if asked == SPARK_SUBMIT or (asked == "spark" and operation.queue not in worker_queues):
        return None
    if operation.resource:
        return f"resource {operation.resource} needs a driver JVM of its own: run by spark-submit"
    spark_keys = sorted(k for k in operation.extra_params or {} if k.startswith("spark."))
    if spark_keys:
        return (
            f"Spark settings {', '.join(spark_keys)} are fixed when a SparkSession starts: "
            "run by spark-submit"
        )
    if table.storage_options:
        return (
            "the table's storage options reach Spark tasks through the application's "
            "environment, one set per application: run by spark-submit"
        )
    return None
