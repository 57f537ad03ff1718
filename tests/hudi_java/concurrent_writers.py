"""Two Hudi writers at once in the Hudi child's SparkSession (run through `HudiSpark.run`).

The first writer is held after it wrote its files (its markers on the timeline server, its
instant inflight, its heartbeat beating) and before it commits: a pre-commit validator's
query calls a Python UDF that says it is holding (a file) and waits for the test's go (another
file). Hudi runs pre-commit validators inside the write, before the commit takes the lock,
so the second writer writes meanwhile; then the first is let go and commits.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

HOLD_UDF = "tms_hold_writer"
HOLD_TIMEOUT = 600.0
"""Seconds the held writer waits for its go (the second write runs meanwhile)."""


def _hold_udf() -> Any:
    """The UDF, pickled by value (Spark's Python workers cannot import the tests)."""
    timeout = HOLD_TIMEOUT

    def hold(held: str, go: str) -> int:
        """In a Python worker: say the writer is held, and wait for the go."""
        import os
        import time

        with open(held, "w"):
            pass
        deadline = time.monotonic() + timeout
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no go ({go}) within {timeout:.0f} s")
            time.sleep(0.05)
        return 1

    return hold


def holding_options(held: Path, go: Path) -> dict[str, str]:
    """The first writer's extra options: a pre-commit validator that holds it."""
    query = f"select max({HOLD_UDF}('{held}', '{go}')) from <TABLE_NAME>#1"
    return {
        "hoodie.precommit.validators": (
            "org.apache.hudi.client.validator.SqlQuerySingleResultPreCommitValidator"
        ),
        "hoodie.precommit.validators.single.value.sql.queries": query,
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def write_while_held(
    spark: Any,
    path: str,
    schema: str,
    first: tuple[list[tuple[Any, ...]], dict[str, str]],
    second: tuple[list[tuple[Any, ...]], dict[str, str]],
    held: str,
    go: str,
) -> dict[str, str | None]:
    """Write `first` (rows, options) held before its commit, `second` meanwhile, then let
    the first go. Each writer's outcome: None when it committed, else its error's text."""
    spark.udf.register(HOLD_UDF, _hold_udf(), "int")
    outcome: dict[str, str | None] = {}

    def write(name: str, rows: list[tuple[Any, ...]], options: dict[str, str]) -> None:
        try:
            frame = spark.createDataFrame(rows, schema)
            frame.write.format("hudi").options(**options).mode("append").save(path)
            outcome[name] = None
        except Exception as exc:
            outcome[name] = _describe(exc)

    rows, options = first
    holder = threading.Thread(target=write, args=("first", rows, options), daemon=True)
    holder.start()
    deadline = time.monotonic() + HOLD_TIMEOUT
    while not Path(held).exists() and holder.is_alive():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the first writer was not held within {HOLD_TIMEOUT:.0f} s")
        time.sleep(0.05)
    try:
        if holder.is_alive():
            write("second", *second)
        else:
            outcome["second"] = "not run: the first writer ended before it was held"
    finally:
        Path(go).touch()
        holder.join(HOLD_TIMEOUT)
    return outcome
