"""Partition TTL as a service on a table Hudi 1.2 wrote (version 9, merge-on-read, metadata
table on), in tms's job protocol inside Hudi's Spark: tms plans the expired partitions (a
partition a pending compaction plans is left out), Hudi's write client deletes them
(`deletePartitions` and the replacecommit's commit; `auto`: tms's own code has none). After it,
Hudi's reader and hudi-rs read exactly the rows of the kept partitions, the metadata table
agrees with the file system as Hudi's validator judges it, Hudi's writer writes on (into the
deleted partition too), and tms's clean removes the deleted partition: its files, its folder
and, in the metadata table, its files record and its entry in the partition list, as Hudi's
clean does (`partitionsToBeDeleted`, `isPartitionDeleted`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, hudi_rs_rows
from tests.hudi_java.test_log_compacted_tables import Table as HudiWrittenTable
from tms.hudi.actions import PARTITION_TTL
from tms.hudi.avro.commit_metadata import ReplaceCommitMetadata
from tms.hudi.metadata.keys import PARTITION_LIST_KEY
from tms.hudi.metadata.partitions import FILES
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import Storage
from tms.hudi.timeline.instant import Action, Instant, State, format_instant_time
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_FILE_VERSIONS, schedule_clean
from tms.services.compaction.plan import schedule_compaction
from tms.services.partition_ttl.plan import dry_run, schedule_partition_ttl
from tms.services.registry import table_service

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

TTL_DAYS = 3


def days_after(instant_time: str, days: int) -> str:
    """The instant time `days` days of 24 hours later (Hudi's `instantTimePlusMillis`)."""
    moment = datetime.strptime(instant_time[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    moment += timedelta(days=days, milliseconds=int(instant_time[14:] or 0))
    return format_instant_time(moment)


class Table(HudiWrittenTable):
    def attempt(self, **fields: Any) -> dict[str, Any]:
        """One `partition_ttl` attempt in tms's job protocol; its exit code and result."""
        outcome: dict[str, Any] = self.hudi.run(
            "tests.hudi_java.hudi_jobs:run_attempt", str(self.path), PARTITION_TTL, fields
        )
        return outcome

    def metadata_problems(self) -> list[str]:
        report = self.hudi.run("tests.hudi_java.metadata_check:compare", str(self.path))
        problems: list[str] = report["problems"]
        return problems

    def listed_partitions(self) -> list[str]:
        """The partitions the metadata table's partition list holds (live entries)."""
        reader = MetadataTableReader.open(Storage(str(self.path)))
        listed = reader.read_partition(FILES)[PARTITION_LIST_KEY].live_files()
        return sorted(listed)

    def clean_plan(self, instant: str) -> dict[str, Any]:
        timeline = self.open().timeline()
        plan = timeline.avro_details(
            Instant(instant, Action.CLEAN, State.REQUESTED), State.REQUESTED
        )
        assert plan is not None
        return plan

    def clean_metadata(self, instant: str) -> dict[str, Any]:
        timeline = self.open().timeline()
        done = timeline.get(instant)
        assert done is not None and done.is_completed
        metadata = timeline.avro_details(done, State.COMPLETED)
        assert metadata is not None
        return metadata


def test_tms_plans_a_partition_ttl_and_hudis_code_deletes_the_partitions(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path
) -> None:
    table = Table(hudi_spark(HUDI_1_2), tmp_path / "events", 9)
    table.write("insert", [(f"k{i}", 10, f"p{i % 3}", float(i)) for i in range(9)])
    table.write("upsert", [("k1", 20, "p1", 1.5), ("k4", 20, "p1", 4.5)])  # p1's log files
    compaction = schedule_compaction(table.open())  # pending on p1's file groups
    assert compaction is not None
    table.write("insert", [("k20", 30, "p2", 20.0)])  # a new file group: p2 is renewed
    hudi_table = table.open()
    p2_last = max(
        s.base_instant_time for s in hudi_table.file_system_view().latest_file_slices("p2")
    )
    as_of = days_after(p2_last, TTL_DAYS)  # p2 exactly TTL_DAYS old: kept, as Hudi keeps it

    report = dry_run(hudi_table, ttl_days=TTL_DAYS, now=as_of)
    assert report.partitions == ["p0"], report
    kept = {v.partition: v.reason for v in report.kept}
    assert kept == {
        "p1": f"expired, but compaction {compaction} is pending on it",
        "p2": f"last commit within {TTL_DAYS} days",
    }
    p0_groups = {s.file_id for s in hudi_table.file_system_view().latest_file_slices("p0")}
    planned = schedule_partition_ttl(hudi_table, ttl_days=TTL_DAYS, now=as_of)
    assert planned is not None
    assert table_service(PARTITION_TTL).pending_plans(table.open()) == [planned]

    outcome = table.attempt(instant=planned)
    result = outcome["result"]
    assert outcome["code"] == 0 and result["outcome"] == "SUCCEEDED", outcome
    figures = result["figures"]
    assert figures["executor"] == "hudi", figures
    assert "no partition_ttl executor" in figures["native_declined"], figures
    assert figures["partitions_deleted"] == ["p0"]
    assert figures["file_groups_by_partition"] == {"p0": len(p0_groups)}
    timeline = table.open().timeline()
    done = timeline.get(planned)
    assert done is not None and done.is_completed and done.action is Action.REPLACE_COMMIT
    metadata = timeline.commit_metadata(done)
    assert isinstance(metadata, ReplaceCommitMetadata)
    assert metadata.operation_type == "DELETE_PARTITION"
    assert metadata.replaced_file_ids() == {"p0": p0_groups}
    assert not timeline.is_clustering(done)

    table.model = {k: row for k, row in table.model.items() if row[2] != "p0"}
    expected = sorted(table.model.values())
    assert table.hudi.read(table.path, COLUMNS) == expected
    assert hudi_rs_rows(str(table.path)) == expected
    # Hudi's metadata writer keeps p0 listed with its files until the clean: as listed
    assert table.metadata_problems() == []

    assert "p0" in table.listed_partitions()

    # tms's clean past the retention: p0's files go, then its folder, then the metadata
    # table's record of it (p1's slices stay for its pending compaction)
    clean = schedule_clean(table.open(), policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    assert table.clean_plan(clean)["partitionsToBeDeleted"] == ["p0"]
    cleaned = execute_clean(spark, table.open(), clean)
    assert cleaned.files_deleted >= len(p0_groups)
    assert not (table.path / "p0").exists()
    deleted = table.clean_metadata(clean)["partitionMetadata"]
    assert {p: m["isPartitionDeleted"] for p, m in deleted.items()} == {"p0": True}
    assert table.listed_partitions() == ["p1", "p2"]
    assert table.hudi.read(table.path, COLUMNS) == expected
    assert hudi_rs_rows(str(table.path)) == expected
    report = table.hudi.run("tests.hudi_java.metadata_check:compare", str(table.path))
    assert report["problems"] == [] and report["partitions"] == 2, report

    # Hudi's writer writes on, into the deleted partition too (a new folder, a new file group)
    table.write("upsert", [("k2", 40, "p2", 2.5), ("k30", 40, "p0", 30.0)])
    table.reads_right()
    assert {row[0] for row in table.model.values() if row[2] == "p0"} == {"k30"}
    assert table.listed_partitions() == ["p0", "p1", "p2"]
    # a partition with a live file group again is no clean's to delete
    assert schedule_clean(table.open(), policy=KEEP_LATEST_FILE_VERSIONS, retained=1) is None
