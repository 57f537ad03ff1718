"""Partition stats of a table partitioned by a timestamp key generator, kept by tms's own
services as Hudi keeps them: event tables partitioned by day (a number of epoch
milliseconds, or a date string, printed as the day's path), with column stats and partition
stats in the metadata table.

Hudi computes the partition field's stats like any column's: from the values the files hold
(the number or the string), not from the printed path, and so do tms's services. Each
service runs natively on the table and by Hudi's own code on a copy of it, on the same plan;
the partition stats of the two agree, the metadata table agrees with the file system as
Hudi's classes read both, Hudi's reader with data skipping on reads the model's rows while
pruning a partition, hudi-rs reads them too, and Hudi's writer writes on."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.hudi_java.support import HUDI_1_0, HUDI_1_2, HudiRelease, HudiSpark
from tms.hudi.metadata.partitions import PARTITION_STATS
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
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
COLUMNS = ["key", "ts", "day", "val"]
FIRST_DAY = datetime(2026, 3, 1, tzinfo=UTC)
SKIPPING = {"hoodie.enable.data.skipping": "true", "hoodie.metadata.enable": "true"}


@dataclass(frozen=True)
class Case:
    """A table: its release and version, and how its `day` field is typed and printed."""

    release: HudiRelease
    table_version: int
    table_type: str
    day_type: str
    """The DDL type of `day`: `long` (epoch milliseconds) or `string` (a date and time)."""
    timestamp_options: dict[str, str]

    @property
    def id(self) -> str:
        kind = "mor" if self.table_type == "MERGE_ON_READ" else "cow"
        return f"hudi-{self.release.version}-v{self.table_version}-{kind}-{self.day_type}"

    @property
    def schema(self) -> str:
        return f"key string, ts long, day {self.day_type}, val double"

    def day(self, partition: int, hour: int) -> Any:
        moment = FIRST_DAY + timedelta(days=partition, hours=hour)
        if self.day_type == "long":
            return int(moment.timestamp() * 1000)
        return moment.strftime("%Y-%m-%d %H:%M:%S")

    def options(self) -> dict[str, str]:
        return {
            "hoodie.table.name": "events",
            "hoodie.datasource.write.table.type": self.table_type,
            "hoodie.datasource.write.recordkey.field": "key",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.partitionpath.field": "day",
            "hoodie.datasource.write.keygenerator.class": (
                "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
            ),
            "hoodie.keygen.timebased.timezone": "UTC",
            "hoodie.metadata.enable": "true",
            "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.metadata.index.partition.stats.enable": "true",
            "hoodie.insert.shuffle.parallelism": "2",
            "hoodie.upsert.shuffle.parallelism": "2",
            "hoodie.delete.shuffle.parallelism": "2",
            # new keys go to new file groups, so a partition holds several small ones to cluster
            "hoodie.parquet.small.file.limit": "0",
            **self.timestamp_options,
            **self.release.write_options(self.table_version),
        }


CASES = [
    Case(
        HUDI_1_2,
        9,
        "MERGE_ON_READ",
        "long",
        {
            "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
            "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        },
    ),
    Case(
        HUDI_1_0,
        8,
        "COPY_ON_WRITE",
        "string",
        {
            "hoodie.keygen.timebased.timestamp.type": "DATE_STRING",
            "hoodie.keygen.timebased.input.dateformat": "yyyy-MM-dd HH:mm:ss",
            "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd",
        },
    ),
]


def case_id(case: Case) -> str:
    return case.id


class Tables:
    """The table tms's own code services and its copy Hudi's code services, written alike by
    Hudi's writer, and the rows both must read."""

    def __init__(self, hudi: HudiSpark, by_hudi: HudiSpark, root: Path, case: Case) -> None:
        self.hudi = hudi
        self.by_hudi = by_hudi
        self.case = case
        self.native = root / "events"
        self.copy = root / "events_by_hudi"
        self.model: dict[str, Row] = {}
        self.diverged = False
        """Whether Hudi's writer wrote both tables since the copy (at different instants)."""

    def row(self, n: int, partition: int, version: int) -> Row:
        """Key `n`'s row; the larger partition's values are larger, so a filter on `val`
        prunes the other partition by its stats."""
        return (f"k{n:02d}", version, self.case.day(partition, n % 5), 100.0 * partition + n)

    def write(self, operation: str, rows: list[Row], both: bool = False) -> None:
        self.diverged |= both
        for path in (self.native, self.copy) if both else (self.native,):
            options = {**self.case.options(), "hoodie.datasource.write.operation": operation}
            self.hudi.write(path, rows, self.case.schema, options)
        for r in rows:
            if operation == "delete":
                self.model.pop(r[0])
            else:
                self.model[r[0]] = r

    def twin(self) -> None:
        """The copy, as the table is now: Hudi's writer's later writes go to both."""
        shutil.copytree(self.native, self.copy)
        shutil.rmtree(self.copy / ".hoodie" / ".temp", ignore_errors=True)

    def reads_right(self) -> None:
        """Hudi's reader and hudi-rs read the model; with data skipping, a filter on `val`
        reads only the larger partition's file slices, and the right rows."""
        expected = sorted(self.model.values())
        assert self.read() == expected
        by_hudi_rs = oracle.snapshot(str(self.native)).select(COLUMNS).to_pylist()
        assert sorted(self._typed(tuple(r.values())) for r in by_hudi_rs) == expected
        pruned = self.hudi.run(
            "tests.hudi_java.metadata_check:pruned_read",
            str(self.native),
            COLUMNS,
            "val >= 100",
            SKIPPING,
        )
        assert sorted(self._typed(r) for r in pruned["rows"]) == [
            r for r in expected if r[3] >= 100
        ]
        slices = HudiTable.open(str(self.native)).file_system_view().latest_file_slices()
        assert 0 < pruned["files_read"] < len(slices), pruned

    def read(self) -> list[Row]:
        return sorted(self._typed(r) for r in self.hudi.read(self.native, COLUMNS))

    def _typed(self, r: Row) -> Row:
        """Hudi's reader types a timestamp key generator's partition field a string (the
        value the file holds, not the printed path)."""
        day = int(r[2]) if self.case.day_type == "long" else r[2]
        return (r[0], r[1], day, r[3])

    def metadata_agrees(self, path: Path) -> None:
        report = self.hudi.run("tests.hudi_java.metadata_check:compare", str(path), COLUMNS)
        assert report["problems"] == [], report
        assert report["column_stats"] > 0 and report["files"] > 0

    def stats_agree(self) -> None:
        """The partition stats tms wrote are the ones Hudi's code wrote on the copy, for every
        partition and column, the day's among them: sizes apart (two Parquet writers), and
        the commit times' once Hudi's writer wrote both (at two instants)."""
        native, by_hudi = partition_stats(self.native), partition_stats(self.copy)
        if self.diverged:
            for stats in (native, by_hudi):
                for key in [k for k in stats if k[1] == "_hoodie_commit_time"]:
                    stats[key] = stats[key][2:]
        assert native == by_hudi
        days = [stats for (_, column), stats in native.items() if column == "day"]
        assert days and all(isinstance(s[0], int | str) for s in days), native

    def serviced(self, result: ServiceResult) -> None:
        assert result.state == "COMPLETED", result
        self.metadata_agrees(self.native)
        self.reads_right()

    def by_hudis_code(self, action: str, instant: str) -> None:
        """The same plan run by Hudi's code on the copy."""
        outcome = self.by_hudi.run(
            "tests.hudi_java.hudi_jobs:run_attempt",
            str(self.copy),
            action,
            {"executor": "hudi", "instant": instant},
        )
        result = outcome["result"]
        assert outcome["code"] == 0 and result["outcome"] == "SUCCEEDED", outcome
        assert result["figures"]["executor"] == "hudi"
        self.metadata_agrees(self.copy)


def partition_stats(path: Path) -> dict[tuple[str, str], Row]:
    """(partition, column) → what a partition stats record says of the column's values."""
    reader = MetadataTableReader.open(Storage(str(path)))
    out: dict[tuple[str, str], Row] = {}
    for record in reader.read_partition(PARTITION_STATS).values():
        stats = record.column_stats()
        assert stats is not None
        out[stats.file_name, stats.column_name] = (
            stats.min_value.value if stats.min_value else None,
            stats.max_value.value if stats.max_value else None,
            stats.value_count,
            stats.null_count,
            stats.is_deleted,
            stats.is_tight_bound,
            stats.value_type,
        )
    return out


def same_plan(
    table: Path, copy: Path, schedule: Callable[[HudiTable], str | None]
) -> tuple[str, str]:
    """The plan scheduled on both tables (alike, so their plans are too): its instants."""
    instants = [schedule(HudiTable.open(str(path))) for path in (table, copy)]
    assert instants[0] is not None and instants[1] is not None
    return instants[0], instants[1]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_native_services_keep_a_timestamp_partitioned_tables_partition_stats_as_hudi_does(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path, case: Case
) -> None:
    tables = Tables(hudi_spark(case.release), hudi_spark(HUDI_1_2), tmp_path, case)
    tables.write("insert", [tables.row(n, n % 2, 1) for n in range(6)])
    tables.write("insert", [tables.row(n, n % 2, 1) for n in range(6, 10)])
    tables.write("upsert", [tables.row(n, n % 2, 2) for n in (1, 2, 7)])
    tables.write("delete", [tables.model["k04"]])
    assert unsupported_features(HudiTable.open(str(tables.native))) == []
    tables.metadata_agrees(tables.native)
    tables.reads_right()
    tables.twin()
    native = HudiTable.open(str(tables.native))
    assert native.config.table_version == case.table_version
    assert PARTITION_STATS in native.config.metadata_partitions

    if case.table_type == "MERGE_ON_READ":
        mine, copys = same_plan(tables.native, tables.copy, schedule_compaction)
        tables.serviced(execute_compaction(spark, HudiTable.open(str(tables.native)), mine))
        tables.by_hudis_code("compaction", copys)
        tables.stats_agree()
        tables.write("upsert", [tables.row(n, n % 2, 3) for n in (0, 5, 10)], both=True)
        tables.stats_agree()

    def cluster(t: HudiTable) -> str | None:
        return schedule_clustering(t, small_file_limit=1 << 30)

    mine, copys = same_plan(tables.native, tables.copy, cluster)
    clustered = execute_clustering(spark, HudiTable.open(str(tables.native)), mine)
    assert clustered.file_groups > clustered.files_written > 0
    tables.serviced(clustered)
    tables.by_hudis_code("clustering", copys)
    tables.stats_agree()
    tables.write("upsert", [tables.row(n, n % 2, 4) for n in (1, 6, 11)], both=True)
    tables.stats_agree()

    def clean(t: HudiTable) -> str | None:
        return schedule_clean(t, policy=KEEP_LATEST_FILE_VERSIONS, retained=1)

    mine, copys = same_plan(tables.native, tables.copy, clean)
    cleaned = execute_clean(spark, HudiTable.open(str(tables.native)), mine)
    assert cleaned.files_deleted > 0
    tables.serviced(cleaned)
    tables.by_hudis_code("clean", copys)
    tables.stats_agree()
    tables.write("upsert", [tables.row(n, n % 2, 5) for n in (2, 3, 12)], both=True)
    tables.write("delete", [tables.model["k06"]], both=True)
    tables.stats_agree()
    tables.metadata_agrees(tables.native)
    tables.reads_right()
