"""tms's own log compaction executor on tables Hudi 1.2 writes (version 9 and version 6, the
metadata table on, its `files` partition alone): tms plans, `auto` picks tms's own code, and
each due slice's log files become one new log file whose blocks stand for the blocks they
merged (`COMPACTED_BLOCK_TIMES`); the instant completes as a `LOG_COMPACT` delta commit. Hudi's
reader and hudi-rs read the rows they read before, the metadata table agrees with the file
system as Hudi's classes read both, a second log compaction stands for the first, Hudi's writer
writes on and tms's compaction reads right. (On a table whose metadata table has column stats
native declines and Hudi's code runs it: `test_log_compaction_service`.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, hudi_rs_rows
from tests.hudi_java.test_log_compaction_service import THRESHOLD, Table
from tms.hudi.actions import LOG_COMPACTION
from tms.hudi.files.log_block import HeaderKey
from tms.hudi.files.log_reader import iter_log_file
from tms.hudi.metadata.partitions import FILES
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import transition
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction
from tms.services.registry import table_service

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

FILES_ONLY = {
    "hoodie.metadata.index.column.stats.enable": "false",
    "hoodie.metadata.index.partition.stats.enable": "false",
}


def log_compacted(table: Table, instant: str) -> list[dict[str, str]]:
    """The headers of the blocks `instant` wrote, and checks of its delta commit."""
    hudi_table = table.open()
    timeline = hudi_table.timeline()
    done = timeline.get(instant)
    assert done is not None and done.is_completed and done.action is Action.DELTA_COMMIT
    assert timeline.origin_action(done) is Action.LOG_COMPACTION
    metadata = timeline.commit_metadata(done)
    assert metadata.operation_type == "LOG_COMPACT" and metadata.compacted
    headers = []
    for stats in metadata.partition_to_write_stats.values():
        for stat in stats:
            assert stat.path and stat.log_files and stat.path.endswith(stat.log_files[-1])
            with hudi_table.storage.open_ranged(stat.path) as handle:
                blocks = list(iter_log_file(handle, decode=False))  # type: ignore[arg-type]
            assert blocks and stat.file_size_in_bytes == hudi_table.storage.info(stat.path).size
            headers += [
                {k.name: v for k, v in b.header.items() if k is not HeaderKey.SCHEMA}
                for b in blocks
            ]
    assert headers and all(h["INSTANT_TIME"] == instant for h in headers)
    return headers


@pytest.mark.parametrize("table_version", [6, 9], ids=["v6", "v9"])
def test_native_log_compaction_reads_as_before_and_hudi_writes_on(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path, table_version: int
) -> None:
    table = Table(hudi_spark(HUDI_1_2), tmp_path / f"native_v{table_version}", table_version)
    table.options.update(FILES_ONLY)
    table.write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    table.many_delta_commits(20)
    assert table.open().config.metadata_partitions == [FILES]
    before = table.blocks()
    rows = table.hudi.read(table.path, COLUMNS)
    assert rows == sorted(table.model.values()) == hudi_rs_rows(str(table.path))

    figures = table.succeeds(extra_params={"log_blocks_threshold": str(THRESHOLD)})
    assert figures["executor"] == "native", figures
    assert figures["file_groups"] > 0 and figures["log_files_compacted"] > 0, figures
    headers = log_compacted(table, figures["instant"])
    assert all(h["COMPACTED_BLOCK_TIMES"] for h in headers), headers
    due = {file_id for file_id, count in before.items() if count >= THRESHOLD}
    after = table.blocks()
    assert due and all(after[file_id] < before[file_id] for file_id in due), (before, after)
    assert table.hudi.read(table.path, COLUMNS) == rows
    table.reads_right()  # Hudi's reader, hudi-rs, the metadata table against the listing

    # Hudi's writer writes on; a second native log compaction stands for the first
    table.write("upsert", [("k1", 30, "p1", 1.25), ("k2", 30, "p0", 2.25), ("k8", 30, "p0", 8.0)])
    table.write("delete", [("k5", 31, "p1", 0.0)])
    again = table.succeeds(extra_params={"log_blocks_threshold": "3"})
    assert again["executor"] == "native" and again["file_groups"] > 0, again
    named = {
        t
        for h in log_compacted(table, again["instant"])
        for t in h["COMPACTED_BLOCK_TIMES"].split(",")
    }
    assert figures["instant"] in named, (figures["instant"], named)
    table.reads_right()

    # tms's compaction reads through the log-compacted blocks; Hudi's writer writes on
    compaction = schedule_compaction(table.open())
    assert compaction is not None
    assert execute_compaction(spark, table.open(), compaction).state == "COMPLETED"
    table.write("upsert", [("k1", 50, "p1", 1.5), ("k9", 50, "p0", 9.0)])
    table.reads_right()
    assert table.open().config.table_version == table_version


def test_a_native_run_a_crash_left_inflight_is_rolled_back_to_its_plan_and_run_again(
    hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path
) -> None:
    table = Table(hudi_spark(HUDI_1_2), tmp_path / "native_crashed", 9)
    table.options.update(FILES_ONLY)
    table.write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    table.many_delta_commits(20)
    planned = table_service(LOG_COMPACTION).schedule(
        table.open(), {"log_blocks_threshold": THRESHOLD}
    )
    assert planned is not None
    hudi_table = table.open()
    requested = hudi_table.timeline().get(planned)
    assert requested is not None and requested.state is State.REQUESTED
    transition(hudi_table.storage, hudi_table.config, requested, State.INFLIGHT)
    outcome = table.attempt(instant=planned, executor="native")
    result = outcome["result"]
    assert result["outcome"] == "SUCCEEDED", result
    assert result["figures"]["executor"] == "native" and result["figures"]["rolled_back"]
    completed = table.open().timeline().get(planned)
    assert completed is not None and completed.state is State.COMPLETED
    table.reads_right()
    table.write("upsert", [("k1", 60, "p1", 1.25)])  # Hudi's writer writes on
    table.reads_right()
