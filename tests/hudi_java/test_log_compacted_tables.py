"""Tables whose writers log-compact (Hudi's write client, RFC-48): tms's own services read a
completed log compaction as Hudi does (its blocks stand for the blocks they name) and service
the table natively: compaction of slices holding the log-compacted log file and the ones it
stands for, clustering and clean, with Hudi's writer writing and log-compacting between them.
After each, Hudi's reader and hudi-rs read the model's rows, the metadata table agrees with
the file system as Hudi's classes read both, and Hudi's writer writes on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tms.services.metadata.compaction as metadata_compaction
from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA, hudi_rs_rows
from tests.hudi_java.writer_options import SERVICES_OFF_THE_WRITER
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_FILE_VERSIONS, schedule_clean
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction
from tms.services.execution import ServiceResult
from tms.services.table_refusals import unsupported_features

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]


class Table:
    """The table, Hudi's writer on it, and the rows it must read."""

    def __init__(self, hudi: HudiSpark, path: Path, table_version: int) -> None:
        self.hudi = hudi
        self.path = path
        self.options = {
            **keyed_table(path.name),
            **HUDI_1_2.write_options(table_version),
            **SERVICES_OFF_THE_WRITER,
            "hoodie.metadata.enable": "true",
            # new keys go to new file groups, so a partition holds several small ones to cluster
            "hoodie.parquet.small.file.limit": "0",
        }
        self.model: dict[str, Row] = {}

    def write(self, operation: str, rows: list[Row]) -> None:
        options = {**self.options, "hoodie.datasource.write.operation": operation}
        self.hudi.write(self.path, rows, SCHEMA, options)
        for row in rows:
            if operation == "delete":
                self.model.pop(row[0])
            else:
                self.model[row[0]] = row

    def log_compact(self) -> str:
        """A log compaction by Hudi's write client: every slice with a log file."""
        instant: str = self.hudi.run(
            "tests.hudi_java.table_features:log_compact", str(self.path), self.options
        )
        return instant

    def open(self) -> HudiTable:
        return HudiTable.open(str(self.path))

    def reads_right(self) -> None:
        expected = sorted(self.model.values())
        assert self.hudi.read(self.path, COLUMNS) == expected
        assert hudi_rs_rows(str(self.path)) == expected
        report = self.hudi.run("tests.hudi_java.metadata_check:compare", str(self.path))
        assert report["problems"] == [], report
        assert report["files"] > 0 and report["slices"] > 0

    def serviced(self, result: ServiceResult) -> None:
        assert result.state == "COMPLETED", result
        self.reads_right()


@pytest.mark.parametrize(
    "table_version", [pytest.param(6, marks=pytest.mark.extended), 9], ids=["v6", "v9"]
)
def test_native_services_read_and_service_a_log_compacted_table_as_hudi_does(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path, table_version: int
) -> None:
    table = Table(hudi_spark(HUDI_1_2), tmp_path / f"events_v{table_version}", table_version)
    table.write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    table.write("upsert", [("k0", 20, "p0", 0.5), ("k1", 20, "p1", 1.5), ("k2", 25, "p0", 2.5)])
    table.write("delete", [("k3", 30, "p1", 0.0)])
    table.log_compact()
    # a delta commit after it: its blocks apply after the log-compacted ones
    table.write("upsert", [("k0", 40, "p0", 0.75), ("k5", 40, "p1", 5.5)])
    hudi_table = table.open()
    assert hudi_table.config.table_version == table_version
    assert any(
        hudi_table.timeline().origin_action(i) is Action.LOG_COMPACTION
        for i in hudi_table.timeline().completed()
    )
    assert unsupported_features(hudi_table) == []
    table.reads_right()

    compaction = schedule_compaction(table.open())
    assert compaction is not None
    compacted = execute_compaction(spark, table.open(), compaction)
    assert compacted.files_written == compacted.file_groups > 0
    table.serviced(compacted)
    assert not any(s.log_files for s in table.open().file_system_view().latest_file_slices())

    table.write("upsert", [("k1", 50, "p1", 1.75), ("k8", 50, "p0", 8.0)])
    table.write("upsert", [("k1", 55, "p1", 1.8), ("k4", 55, "p0", 4.5)])
    table.log_compact()
    table.write("delete", [("k6", 60, "p0", 0.0)])
    table.reads_right()
    clustering = schedule_clustering(table.open(), small_file_limit=1 << 30)
    assert clustering is not None
    clustered = execute_clustering(spark, table.open(), clustering)
    assert clustered.file_groups > clustered.files_written > 0
    table.serviced(clustered)

    table.write("upsert", [("k7", 70, "p1", 7.5), ("k9", 70, "p1", 9.0)])
    clean = schedule_clean(table.open(), policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    cleaned = execute_clean(spark, table.open(), clean)
    assert cleaned.files_deleted > 0
    table.serviced(cleaned)
    table.write("upsert", [("k2", 80, "p0", 2.75), ("k10", 80, "p0", 10.0)])
    table.reads_right()
    assert table.open().config.table_version == table_version


def test_native_services_keep_a_metadata_table_hudi_log_compacts(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path
) -> None:
    """Hudi's writer log-compacts the metadata table (`hoodie.metadata.log.compaction.enable`):
    tms reads its files and record index through the log-compacted blocks when it compacts
    the data table and when it compacts the metadata table itself."""
    table = Table(hudi_spark(HUDI_1_2), tmp_path / "events_mdt", 9)
    table.options.update(
        {
            "hoodie.metadata.log.compaction.enable": "true",
            "hoodie.metadata.log.compaction.blocks.threshold": "2",
            "hoodie.metadata.compact.max.delta.commits": "100",  # tms compacts it
            "hoodie.metadata.record.index.enable": "true",
        }
    )
    for n in range(6):
        table.write(
            "upsert", [(f"k{i}", 10 + n, f"p{i % 2}", float(i + n)) for i in range(n, n + 4)]
        )
    table.write("delete", [("k2", 99, "p0", 0.0)])
    metadata = HudiTable.open(str(table.path / ".hoodie" / "metadata"))
    assert metadata.timeline().completed() and any(
        metadata.timeline().origin_action(i) is Action.LOG_COMPACTION
        for i in metadata.timeline().completed()
    )
    table.reads_right()

    compaction = schedule_compaction(table.open())
    assert compaction is not None
    table.serviced(execute_compaction(spark, table.open(), compaction))
    table.write("upsert", [("k0", 50, "p0", 0.5), ("k20", 50, "p1", 20.0)])

    compact_metadata = metadata_compaction.schedule(table.open())
    assert compact_metadata is not None
    table.serviced(metadata_compaction.execute(spark, table.open(), compact_metadata))
    table.write("upsert", [("k1", 60, "p1", 1.5), ("k21", 60, "p0", 21.0)])
    table.write("delete", [("k3", 65, "p1", 0.0)])
    table.reads_right()
