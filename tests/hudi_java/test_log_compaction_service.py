"""Log compaction as a service, in tms's job protocol inside Hudi's Spark: tms plans the file
slices with enough log blocks (Hudi's `HoodieLogCompactionPlan` on the timeline), Hudi's write
client runs the plan (`auto`: tms's own executor declines a metadata table with column stats,
whose entries for log files it does not write), and a plan a writer scheduled and left pending
is run the same way. A log compaction a crash left inflight
is rolled back with its plan, as Hudi does. After each: Hudi's reader and hudi-rs read the
model's rows, the metadata table agrees with the file system as Hudi's classes read both,
tms's own compaction reads through the log-compacted blocks, and Hudi's writer writes on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS
from tests.hudi_java.test_log_compacted_tables import Table as LogCompactedTable
from tms.hudi.actions import LOG_COMPACTION
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import transition
from tms.ingest.commit_action import timeline_action
from tms.services.apache_hudi.procedures import write_client
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction
from tms.services.log_compaction.plan import LOG_COMPACTION_EXECUTOR, log_blocks
from tms.services.registry import table_service

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]
THRESHOLD = 4


def hudi_schedules(spark: Any, base_path: str, options: dict[str, str]) -> str:
    """A writer's log compaction plan, scheduled by Hudi's write client and left pending."""
    configs = {**options, "hoodie.log.compaction.blocks.threshold": str(THRESHOLD)}
    empty = spark._jvm.org.apache.hudi.common.util.Option.empty()
    with write_client(spark, base_path, configs) as client:
        scheduled = client.scheduleLogCompaction(empty)
        assert scheduled.isPresent()
        return str(scheduled.get())


class Table(LogCompactedTable):
    """The table, Hudi's writer on it, the rows it must read, and tms's attempts on it."""

    def attempt(self, **fields: Any) -> dict[str, Any]:
        """One `logcompaction` attempt in tms's job protocol; its exit code and result."""
        outcome: dict[str, Any] = self.hudi.run(
            "tests.hudi_java.hudi_jobs:run_attempt", str(self.path), LOG_COMPACTION, fields
        )
        return outcome

    def succeeds(self, **fields: Any) -> dict[str, Any]:
        outcome = self.attempt(**fields)
        result = outcome["result"]
        assert outcome["code"] == 0 and result is not None, outcome
        assert result["outcome"] == "SUCCEEDED", result
        figures: dict[str, Any] = result["figures"]
        return figures

    def blocks(self) -> dict[str, int]:
        """Per file group of the latest slices, the blocks a merge of its slice applies."""
        table = self.open()
        timeline = table.timeline()
        return {
            s.file_id: log_blocks(table.storage, s, timeline.is_completed)
            for s in table.file_system_view(timeline).latest_file_slices()
        }

    def many_delta_commits(self, start: int) -> None:
        """Five delta commits: three in both partitions, a delete and an upsert in p1."""
        for n in range(3):
            self.write("upsert", [(f"k{i}", start + n, f"p{i % 2}", i + n / 10) for i in range(4)])
        self.write("delete", [("k3", start + 5, "p1", 0.0)])
        self.write("upsert", [("k3", start + 6, "p1", 3.25)])


def completed_log_compaction(table: HudiTable, instant: str) -> bool:
    timeline = table.timeline()
    done = timeline.get(instant)
    return (
        done is not None
        and done.is_completed
        and timeline.origin_action(done) is Action.LOG_COMPACTION
    )


@pytest.mark.parametrize(
    "table_version",
    # tms's plans of version 6 are run (natively) in the default run by
    # test_native_log_compaction; the extended run has Hudi's code run one too
    [pytest.param(6, marks=pytest.mark.extended), 9],
    ids=["v6", "v9"],
)
def test_tms_plans_a_log_compaction_and_hudis_code_runs_it(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path, table_version: int
) -> None:
    table = Table(hudi_spark(HUDI_1_2), tmp_path / f"events_v{table_version}", table_version)
    table.write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    # nothing is due below the threshold: no plan is written
    figures = table.succeeds(extra_params={"log_blocks_threshold": str(THRESHOLD)})
    assert figures["nothing_to_do"] is True, figures
    assert not table.open().timeline().pending((Action.LOG_COMPACTION,))

    table.many_delta_commits(20)
    before = table.blocks()
    due = {file_id for file_id, count in before.items() if count >= THRESHOLD}
    assert due and len(due) < len(before)  # p0 has 3 blocks, p1 5: only p1 is due
    table.reads_right()

    figures = table.succeeds(extra_params={"log_blocks_threshold": str(THRESHOLD)})
    assert figures["executor"] == "hudi", figures
    declined = figures["native_declined"]
    assert "metadata table partitions" in declined and "column_stats" in declined, figures
    assert "executor auto or hudi" in declined, figures
    instant = figures["instant"]
    hudi_table = table.open()
    assert completed_log_compaction(hudi_table, instant)
    done = hudi_table.timeline().get(instant)
    assert done is not None and done.action is Action.DELTA_COMMIT
    # the service's pull names it by what it was requested as, so its counter restarts
    assert timeline_action(hudi_table.timeline(), done) == LOG_COMPACTION
    plan = hudi_table.timeline().compaction_plan(done)
    assert plan["strategy"]["compactorClassName"] == LOG_COMPACTION_EXECUTOR
    assert {op["fileId"] for op in plan["operations"]} == due
    assert figures["file_groups"] == len(due) and figures["log_files_compacted"] > 0, figures
    after = table.blocks()
    assert all(after[file_id] < before[file_id] for file_id in due), (before, after)
    table.reads_right()

    # Hudi's writer writes on; tms's own compaction reads through the log-compacted blocks
    table.write("upsert", [("k0", 40, "p0", 0.75), ("k9", 40, "p1", 9.0)])
    table.reads_right()
    compaction = schedule_compaction(table.open())
    assert compaction is not None
    compacted = execute_compaction(spark, table.open(), compaction)
    assert compacted.state == "COMPLETED" and compacted.file_groups >= len(due)
    table.reads_right()
    table.write("upsert", [("k1", 50, "p1", 1.5)])
    table.reads_right()
    assert table.open().config.table_version == table_version


def test_a_writers_pending_plan_runs_and_a_crashed_one_is_rolled_back_with_its_plan(
    hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path
) -> None:
    table = Table(hudi_spark(HUDI_1_2), tmp_path / "events_pending", 9)
    table.write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    table.many_delta_commits(20)
    rows = table.hudi.read(table.path, COLUMNS)

    # a writer scheduled a log compaction and left it: tms finds it and runs it
    written = table.hudi.run(
        "tests.hudi_java.test_log_compaction_service:hudi_schedules",
        str(table.path),
        table.options,
    )
    service = table_service(LOG_COMPACTION)
    assert service.pending_plans(table.open()) == [written]
    figures = table.succeeds(instant=written)
    assert figures["executor"] == "hudi" and figures["file_groups"] > 0, figures
    assert completed_log_compaction(table.open(), written)
    assert service.pending_plans(table.open()) == []
    table.reads_right()

    # a run that crashed after going inflight: rolled back with its plan, as Hudi does
    table.many_delta_commits(30)
    planned = service.schedule(table.open(), {"log_blocks_threshold": THRESHOLD})
    assert planned is not None
    hudi_table = table.open()
    requested = hudi_table.timeline().get(planned)
    assert requested is not None and requested.state is State.REQUESTED
    transition(hudi_table.storage, hudi_table.config, requested, State.INFLIGHT)
    rows = table.hudi.read(table.path, COLUMNS)
    outcome = table.attempt(instant=planned)
    result = outcome["result"]
    assert result["outcome"] == "FAILED" and not result["retryable"], result
    assert "left inflight" in result["error"] and "submit again" in result["error"], result
    timeline = table.open().timeline()
    assert timeline.get(planned) is None
    assert any(i.action is Action.ROLLBACK and i.is_completed for i in timeline.instants), (
        timeline.instants
    )
    assert table.hudi.read(table.path, COLUMNS) == rows
    table.reads_right()
    # and the next run plans those slices again
    figures = table.succeeds(extra_params={"log_blocks_threshold": str(THRESHOLD)})
    assert figures["executor"] == "hudi" and figures["file_groups"] > 0, figures
    table.write("upsert", [("k2", 60, "p0", 2.5)])
    table.reads_right()
