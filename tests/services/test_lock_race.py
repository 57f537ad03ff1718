"""A writer and the compaction scheduler race on one table, 50 times, both taking the table
lock (Hudi's file-system lock): a plan never includes a write that was in flight when it was
made, and no commit is lost once every plan has run (hudi-rs reads every write)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.services.test_clustering import trips
from tms.hudi.errors import CompactionConflictError
from tms.hudi.files.names import LogFileName
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.hudi.timeline.timeline import Timeline
from tms.services.compaction.execute import execute_compaction
from tms.services.registry import table_service
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

pytestmark = [pytest.mark.spark]

ROUNDS = 50
KEYS = 40


def check_plan(timeline: Timeline, instant: str, table_version: int) -> None:
    """Every log file the plan compacts was written by a write that completed before the
    plan was made (version 8 and 9 name the writing delta commit in the log file; on 6 the
    rows read back at the end are the check)."""
    plan = timeline.compaction_plan(timeline.get(instant))  # type: ignore[arg-type]
    for operation in plan["operations"]:
        for log in operation["deltaFilePaths"]:
            if table_version >= 8:
                wrote = LogFileName.parse(log.rsplit("/", 1)[-1])
                assert wrote is not None
                done = timeline.completion_time(wrote.base_instant_time)
                assert done is not None and done < instant, (log, instant)


@pytest.mark.parametrize("table_version", [6, 9], ids=["v6", "v9"])
def test_a_writer_and_the_scheduler_racing_never_lose_a_commit(
    spark: Any, tmp_path: Path, table_version: int
) -> None:
    base = str(tmp_path / "trips")
    table = create_table(
        base,
        "trips",
        table_type=MERGE_ON_READ,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["region"],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=10, locked=True)
    writer.insert(trips(range(KEYS), ts=0))
    compaction = table_service("compaction")
    plans: list[str] = []
    executed: set[str] = set()
    refused = 0
    errors: list[BaseException] = []

    for round_ in range(1, ROUNDS + 1):
        start = threading.Barrier(2)

        def write(ts: int = round_, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                writer.upsert(trips(range(ts % 4, KEYS, 4), ts=ts))
            except BaseException as exc:  # the assertion below names it
                errors.append(exc)

        def schedule(start: threading.Barrier = start) -> None:
            nonlocal refused
            start.wait()
            try:
                planned = compaction.schedule(HudiTable.open(base), {})
            except CompactionConflictError:
                refused += 1  # the write's instant was there first: refused, as it must be
                return
            if planned is not None:
                plans.append(planned)

        threads = [threading.Thread(target=write), threading.Thread(target=schedule)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        if plans and plans[-1] not in executed:
            check_plan(HudiTable.open(base).timeline(), plans[-1], table_version)
            execute_compaction(spark, HudiTable.open(base), plans[-1], heartbeat_interval=1)
            executed.add(plans[-1])

    timeline = HudiTable.open(base).timeline()
    writes = timeline.completed((Action.DELTA_COMMIT,))
    assert len(writes) == ROUNDS + 1, "every write completed"
    assert len(plans) >= ROUNDS // 4, "many rounds planned a compaction"
    expected = {f"k{i:05d}": max(r for r in range(ROUNDS + 1) if r % 4 == i % 4 or r == 0)
                for i in range(KEYS)}  # fmt: skip
    rows = oracle.rows_by_key(base)
    assert {key: row["ts"] for key, row in rows.items()} == expected
    assert refused + len(plans) <= ROUNDS
