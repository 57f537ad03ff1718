"""Which engine an operation asks for (its own, else its table policy's, else either), and
why one the scheduler claimed for spark-submit did not go to a worker serving its queue."""

from __future__ import annotations

from typing import Any

import pytest

from tms.application.chosen_engine import asked_engine, engine_note
from tms.store import Operation, Tbl

WORKER_QUEUES = ["default"]


def _operation(**values: Any) -> Operation:
    return Operation(**{"engine": "spark", "queue": "default", **values})


@pytest.mark.parametrize(
    ("own", "policy", "asked"),
    [
        ("spark-worker", {"execution_engine": "spark-submit"}, "spark-worker"),
        ("spark", {"execution_engine": " Spark-Submit "}, "spark-submit"),
        ("spark", {}, "spark"),
        (None, None, "spark"),
    ],
)
def test_the_operation_then_the_policy_then_either(
    own: str | None, policy: dict[str, Any] | None, asked: str
) -> None:
    assert asked_engine(_operation(engine=own), Tbl(policy=policy)) == asked


@pytest.mark.parametrize(
    ("operation", "table", "note"),
    [
        (_operation(resource="4g:4g"), Tbl(), "resource 4g:4g needs a driver JVM of its own"),
        (
            _operation(extra_params={"spark.executor.cores": "2", "x": 1}),
            Tbl(),
            "Spark settings spark.executor.cores are fixed when a SparkSession starts",
        ),
        (_operation(), Tbl(storage_options={"key": "k"}), "the table's storage options"),
        (_operation(engine="spark-worker", resource="4g:4g"), Tbl(), "needs a driver JVM"),
    ],
)
def test_why_a_worker_did_not_take_it(operation: Operation, table: Tbl, note: str) -> None:
    assert note in (engine_note(operation, table, WORKER_QUEUES) or "")


@pytest.mark.parametrize(
    ("operation", "table"),
    [
        (_operation(queue="etl", resource="4g:4g"), Tbl()),  # no worker serves etl
        (_operation(engine="spark-submit", resource="4g:4g"), Tbl()),  # it asked for that
        (
            _operation(resource="4g:4g"),
            Tbl(policy={"execution_engine": "spark-submit"}),
        ),  # its table asked for that
        (_operation(), Tbl()),  # nothing kept it from a worker
    ],
)
def test_no_note_where_no_worker_could_have_had_it(operation: Operation, table: Tbl) -> None:
    assert engine_note(operation, table, WORKER_QUEUES) is None
