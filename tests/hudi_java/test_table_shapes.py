"""Hudi writes, tms services, Hudi reads and writes on, for the shapes of table Hudi's users
write: copy-on-write and merge-on-read, the metadata table on and off, Avro and Parquet log
blocks, nested columns (a struct, an array, a map, a decimal, a date, a timestamp), the simple,
complex and timestamp-based key generators, and table versions 6, 8 and 9. The dimensions are
combined into a few tables so each shape costs one table.

On each, Apache Hudi's writer commits inserts, a delete and an upsert that opens a new
partition; tms compacts (merge-on-read), clusters and cleans; after each service Hudi's reader
returns the test model's rows for a snapshot, a read-optimized query, an incremental query since
an instant before the service and time travel to instants before it, hudi-rs reads the same
snapshot, and Hudi's writer then deletes, upserts into the file groups tms rewrote and inserts,
with the rows right after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests import oracle
from tests.hudi_java.support import HUDI_0_15, HUDI_1_2, HudiRelease, HudiSpark
from tests.hudi_java.writer_options import SERVICES_OFF_THE_WRITER
from tms.hudi.table import HudiTable
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_FILE_VERSIONS, schedule_clean
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]

SCHEMA = (
    "id string, sub int, region string, tier string, day long, ts long, val double,"
    " price decimal(10,2), born date, seen timestamp,"
    " info struct<name: string, score: int>, tags array<string>, attrs map<string, int>"
)
COLUMNS = [
    "id",
    "sub",
    "region",
    "tier",
    "day",
    "ts",
    "val",
    "price",
    "born",
    "seen",
    "info",
    "tags",
    "attrs",
]
REGIONS = ("eu", "us", "ap")
"""Partition values by partition index; the third is the partition a later commit opens."""
FIRST_DAY = datetime(2026, 1, 1, tzinfo=UTC)

KEY_GENERATORS: dict[str, dict[str, str]] = {
    "simple": {
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "region",
    },
    "complex": {
        "hoodie.datasource.write.keygenerator.class": (
            "org.apache.hudi.keygen.ComplexKeyGenerator"
        ),
        "hoodie.datasource.write.recordkey.field": "id,sub",
        "hoodie.datasource.write.partitionpath.field": "region,tier",
    },
    "timestamp": {
        "hoodie.datasource.write.keygenerator.class": (
            "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
        ),
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "day",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        "hoodie.keygen.timebased.timezone": "UTC",
    },
}


@dataclass(frozen=True)
class Shape:
    """One table's dimensions, and the writer options that make Hudi write it."""

    release: HudiRelease
    table_version: int
    merge_on_read: bool
    metadata: bool
    log_blocks: str
    """`hoodie.logfile.data.block.format`: avro or parquet (merge-on-read only)."""
    key_generator: str
    stats_columns: str = ""
    """`hoodie.metadata.index.column.stats.column.list`, if set (Hudi's default: every
    column it can index)."""

    @property
    def id(self) -> str:
        kind = "mor" if self.merge_on_read else "cow"
        logs = f"-{self.log_blocks}" if self.merge_on_read else ""
        metadata = "mdt" if self.metadata else "nomdt"
        return (
            f"hudi-{self.release.version}-v{self.table_version}-{kind}-{metadata}{logs}"
            f"-{self.key_generator}"
        )

    def options(self, name: str) -> dict[str, str]:
        return {
            "hoodie.table.name": name,
            "hoodie.datasource.write.table.type": (
                "MERGE_ON_READ" if self.merge_on_read else "COPY_ON_WRITE"
            ),
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.metadata.enable": str(self.metadata).lower(),
            "hoodie.logfile.data.block.format": self.log_blocks,
            "hoodie.insert.shuffle.parallelism": "2",
            "hoodie.upsert.shuffle.parallelism": "2",
            "hoodie.delete.shuffle.parallelism": "2",
            # new keys go to new file groups, so a partition holds several small ones to cluster
            "hoodie.parquet.small.file.limit": "0",
            **SERVICES_OFF_THE_WRITER,  # the table services are tms's
            **KEY_GENERATORS[self.key_generator],
            **(
                {"hoodie.metadata.index.column.stats.column.list": self.stats_columns}
                if self.stats_columns
                else {}
            ),
            **self.release.write_options(self.table_version),
        }


SHAPES = [
    Shape(HUDI_1_2, 9, merge_on_read=False, metadata=True, log_blocks="avro",
          key_generator="complex"),
    # versions 6 and 8 keep column stats at index version V1: a decimal's in DecimalWrapper
    Shape(HUDI_1_2, 6, merge_on_read=False, metadata=True, log_blocks="avro",
          key_generator="timestamp"),
    Shape(HUDI_1_2, 8, merge_on_read=True, metadata=True, log_blocks="parquet",
          key_generator="complex", stats_columns="id,region,price,born,seen"),
    Shape(HUDI_1_2, 9, merge_on_read=True, metadata=False, log_blocks="parquet",
          key_generator="timestamp"),
    Shape(HUDI_0_15, 6, merge_on_read=True, metadata=False, log_blocks="avro",
          key_generator="simple"),
]  # fmt: skip


def row(n: int, partition: int, version: int) -> Row:
    """Key `n`'s row as write `version` writes it; its partition fields follow `partition`."""
    day = FIRST_DAY + timedelta(days=partition, hours=n % 5)
    return (
        f"k{n:02d}",
        n % 3,
        REGIONS[partition],
        ("gold", "silver", "bronze")[partition],
        int(day.timestamp() * 1000),
        version,
        n * 10.0 + version,
        Decimal(f"{n}.{version:02d}"),
        date(2000, 1, 1 + n % 28),
        datetime(2026, 2, 1, 12, 0) + timedelta(minutes=version, seconds=n),
        (f"name{n}-{version}", n + version),
        [f"t{version}", f"n{n}"],
        {"v": version, "n": n},
    )


def normalized(values: Iterable[Any]) -> Row:
    """A row as the test compares it, whoever read it: a struct as a tuple of its values, a map
    as its sorted items, a list as a tuple, a timestamp as a naive UTC time."""
    return tuple(_normalized(value) for value in values)


def _normalized(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None)  # a naive time is the local one
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    if isinstance(value, tuple):  # a Spark Row
        return tuple(_normalized(item) for item in value)
    if isinstance(value, list):
        if value and all(isinstance(item, tuple) and len(item) == 2 for item in value):
            return tuple(sorted(value))  # an Arrow map's items
        return tuple(_normalized(item) for item in value)
    return value


def arrow_struct(value: Any) -> Any:
    return tuple(value.values()) if isinstance(value, dict) else value


def rows(read: Iterable[Iterable[Any]]) -> list[Row]:
    return sorted(normalized(r) for r in read)


@dataclass
class Model:
    """What the table holds after each commit, by key, and what its base files hold."""

    rows: dict[str, Row] = field(default_factory=dict)
    base: dict[str, Row] = field(default_factory=dict)
    """Merge-on-read: the rows a read-optimized query sees (base files only)."""
    written_by: dict[str, str] = field(default_factory=dict)
    """The instant that last wrote each key."""
    states: dict[str, list[Row]] = field(default_factory=dict)
    """The snapshot after each Hudi commit, by its instant."""

    def snapshot(self) -> list[Row]:
        return sorted(normalized(r) for r in self.rows.values())

    def read_optimized(self) -> list[Row]:
        return sorted(normalized(r) for r in self.base.values())

    def since(self, instant: str) -> list[Row]:
        return sorted(
            normalized(r) for key, r in self.rows.items() if self.written_by[key] >= instant
        )


class Table:
    """One shape's table: Hudi's writer on it, the model beside it."""

    def __init__(self, hudi: HudiSpark, path: Path, shape: Shape) -> None:
        self.hudi = hudi
        self.path = path
        self.shape = shape
        self.options = shape.options(path.name)
        self.model = Model()
        self.writes: list[str] = []

    def write(self, operation: str, written: list[Row]) -> str:
        """One commit of Hudi's writer, and the model after it; its instant."""
        self.hudi.write(
            self.path,
            written,
            SCHEMA,
            {**self.options, "hoodie.datasource.write.operation": operation},
        )
        instant = self.last_instant()
        model = self.model
        for r in written:
            key = r[0]
            if operation == "delete":
                model.rows.pop(key)
                if not self.shape.merge_on_read:
                    model.base.pop(key)
                continue
            # merge-on-read: updates go to log files, new keys to new base files
            if key not in model.rows or not self.shape.merge_on_read:
                model.base[key] = r
            model.rows[key] = r
            model.written_by[key] = instant
        model.states[instant] = model.snapshot()
        self.writes.append(instant)
        return instant

    def last_instant(self) -> str:
        completed = HudiTable.open(str(self.path)).timeline().completed()
        return completed[-1].requested_time

    def service_done(self) -> None:
        """Compaction and clustering of every file group: the base files hold every row."""
        self.model.base = dict(self.model.rows)

    def read(self, options: dict[str, str] | None = None) -> list[Row]:
        """Hudi's reader; it types a timestamp-based key generator's partition field a string
        (its value in the data, not the formatted partition path), with or without tms."""
        read = self.hudi.read(self.path, COLUMNS, options)
        day = COLUMNS.index("day")
        return rows((*r[:day], int(r[day]), *r[day + 1 :]) for r in read)

    def hudi_rs(self) -> list[Row]:
        read = oracle.snapshot(str(self.path)).select(COLUMNS).to_pylist()
        return sorted(
            normalized(
                arrow_struct(value) if name == "info" else value for name, value in r.items()
            )
            for r in read
        )

    def check_snapshot(self) -> None:
        """Hudi's reader and hudi-rs read the model's rows."""
        assert self.read() == self.model.snapshot()
        assert self.hudi_rs() == self.model.snapshot()

    def check_reads(self, service_instant: str | None, older_slices: bool = True) -> None:
        """Hudi's reader (every query type) and hudi-rs return the model's rows; with a service
        instant, also incremental since the last write before it and time travel before it
        (and before the write before that, unless `older_slices` are gone)."""
        model = self.model
        assert self.read() == model.snapshot()
        read_optimized = self.read({"hoodie.datasource.query.type": "read_optimized"})
        assert read_optimized == (
            model.read_optimized() if self.shape.merge_on_read else model.snapshot()
        )
        assert self.hudi_rs() == model.snapshot()
        if service_instant is None:
            return
        last, before_last = self.writes[-1], self.writes[-2]
        assert last < service_instant
        just_before = before(last)  # after the write before the last one, before the last one
        incremental = self.read(
            {
                "hoodie.datasource.query.type": "incremental",
                "hoodie.datasource.read.begin.instanttime": just_before,
            }
        )
        assert incremental == model.since(last) != []
        assert self.read({"as.of.instant": before(service_instant)}) == model.states[last]
        if older_slices:  # a clean keeping one file version leaves none from before
            assert self.read({"as.of.instant": just_before}) == model.states[before_last]


def before(instant: str) -> str:
    """An instant time a millisecond before `instant`: after every instant that completed
    before `instant` was requested, so incremental and time-travel reads select the same
    instants whether Hudi compares requested (version 6) or completion times (8 and 9)."""
    moment = datetime.strptime(instant[:17], "%Y%m%d%H%M%S%f") - timedelta(milliseconds=1)
    return moment.strftime("%Y%m%d%H%M%S%f")[:17]


def hudi_writes(table: Table, step: int, deletes: list[str], upserts: list[int]) -> None:
    """A delete, then one upsert: new versions of `upserts` (existing keys) and a new key in
    every partition (a new file group each, as the small-file limit is 0)."""
    model = table.model.rows
    table.write("delete", [model[key] for key in deletes])
    updated = [row(n, REGIONS.index(model[f"k{n:02d}"][2]), step) for n in upserts]
    fresh = [row(20 + step * 3 + p, p, step) for p in range(len(REGIONS))]
    table.write("upsert", updated + fresh)


EXTENDED_SHAPES = {"hudi-1.2.0-v6-cow-mdt-timestamp", "hudi-1.2.0-v8-mor-mdt-parquet-complex"}
"""Shapes whose features the default run's shapes and tests cover too (copy-on-write with a
metadata table, timestamp keys, version 6 and 8 tables written by Hudi 1.2); the extended run
has them."""


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(s, id=s.id, marks=pytest.mark.extended if s.id in EXTENDED_SHAPES else ())
        for s in SHAPES
    ],
)
def test_tms_services_a_table_of_each_shape_that_hudi_reads_and_writes_on(
    spark: Any,
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    tmp_path: Path,
    shape: Shape,
) -> None:
    hudi = hudi_spark(shape.release)
    table = Table(hudi, tmp_path / "shapes", shape)
    table.write("insert", [row(n, n % 2, 1) for n in range(8)])
    table.write("delete", [table.model.rows["k03"]])
    # updates, a new partition, and a new file group in each old one (groups to cluster)
    table.write(
        "upsert", [row(n, p, 2) for n, p in ((1, 1), (4, 0), (8, 2), (9, 2), (10, 0), (11, 1))]
    )
    path = str(table.path)
    hudi_table = HudiTable.open(path)
    assert hudi_table.config.table_version == shape.table_version
    assert (table.path / ".hoodie" / "metadata").is_dir() is shape.metadata
    table.check_reads(None)

    if shape.merge_on_read:
        compaction = schedule_compaction(HudiTable.open(path))
        assert compaction is not None
        compacted = execute_compaction(spark, HudiTable.open(path), compaction)
        assert compacted.files_written == compacted.file_groups > 0
        table.service_done()
        table.check_reads(compaction)
        hudi_writes(table, 3, deletes=["k00"], upserts=[1, 2, 8])
        table.check_snapshot()

    clustering = schedule_clustering(HudiTable.open(path), small_file_limit=1 << 30)
    assert clustering is not None
    clustered = execute_clustering(spark, HudiTable.open(path), clustering)
    assert clustered.file_groups > clustered.files_written > 0  # small groups merged
    table.service_done()
    table.check_reads(clustering)
    hudi_writes(table, 4, deletes=["k05"], upserts=[1, 6, 9])
    table.check_snapshot()

    clean = schedule_clean(HudiTable.open(path), policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    cleaned = execute_clean(spark, HudiTable.open(path), clean)
    assert cleaned.files_deleted > 0
    table.check_reads(clean, older_slices=False)
    hudi_writes(table, 5, deletes=["k02"], upserts=[1, 4, 7, 9])
    table.check_reads(None)
