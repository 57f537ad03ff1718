"""The base files tms writes carry Hudi's bloom filter of their record keys, as Hudi's writers'
do: byte for byte the filter Hudi builds of the same keys (keys of every length, non-ASCII
ones, and enough of them to fill the dynamic filter's rows up to its bound), and a writer
whose index is Hudi's bloom index writes on after tms compacted and clustered its table
(it failed on every upsert before: `HoodieKeyLookupHandle` dereferences the filter)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA, hudi_rs_rows
from tests.hudi_java.writer_options import SERVICES_OFF_THE_WRITER
from tms.hudi.files.bloom import BLOOM_FILTER_KEY, MAX_ENTRIES, NUM_ENTRIES, DynamicBloomFilter
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.metadata.keys import bloom_filter_key
from tms.hudi.metadata.partitions import BLOOM_FILTERS
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.services.clean.execute import execute_clean
from tms.services.clean.plan import KEEP_LATEST_FILE_VERSIONS, schedule_clean
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction
from tms.services.table_refusals import unsupported_features

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]

MIXED = [
    *(f"k{i}" for i in range(300)),
    *("x" * n for n in range(1, 41)),
    "é",
    "日本/東京",
    "clé-ü-ß",
    "emoji-🙂",
    "a b c",
    *(str(uuid.UUID(int=i)) for i in range(200)),
]
"""Keys of every length 1 to 40 (every tail of MurmurHash), with bytes over 0x7f."""


SIZES = [
    (MIXED, NUM_ENTRIES, MAX_ENTRIES),
    ([str(uuid.UUID(int=i * 7919)) for i in range(3500)], 1000, 1700),
]
"""Keys and the filter's sizes: Hudi's defaults, and rows of 1,000 keys up to 1,700, so that
3,500 keys fill two rows and then go to the rows in turn."""


@pytest.mark.parametrize(
    ("keys", "num_entries", "max_entries"), SIZES, ids=["mixed", "past-the-bound"]
)
def test_the_bloom_filter_is_the_one_hudi_builds_of_the_same_keys(
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    keys: list[str],
    num_entries: int,
    max_entries: int,
) -> None:
    ours = DynamicBloomFilter(num_entries, max_entries=max_entries)
    ours.add(pa.array(keys[: len(keys) // 3]))
    ours.add(pa.chunked_array([pa.array(keys[len(keys) // 3 :])]))
    hudis = hudi_spark(HUDI_1_2).run(
        "tests.hudi_java.bloom_filters:serialized", keys, num_entries, max_entries
    )
    assert ours.serialize() == hudis
    assert len(ours.rows) == (2 if max_entries < len(keys) else 1)


def test_a_bloom_index_writer_writes_on_after_native_compaction_and_clustering(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path
) -> None:
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / "bloom_indexed"
    options = {
        **keyed_table(path.name),
        **HUDI_1_2.write_options(9),
        **SERVICES_OFF_THE_WRITER,
        "hoodie.index.type": "BLOOM",
        "hoodie.metadata.enable": "true",
        "hoodie.parquet.small.file.limit": "0",  # new keys to new file groups: to cluster
    }
    model: dict[str, Row] = {}

    def write(operation: str, rows: list[Row]) -> None:
        hudi.write(path, rows, SCHEMA, {**options, "hoodie.datasource.write.operation": operation})
        model.update({row[0]: row for row in rows})

    def reads_right() -> None:
        assert hudi.read(path, COLUMNS) == sorted(model.values())
        assert hudi_rs_rows(str(path)) == sorted(model.values())

    def keys_in_bloom_filters() -> None:
        """Hudi finds every key of each latest base file in the file's bloom filter."""
        view = HudiTable.open(str(path)).file_system_view()
        for file_slice in view.latest_file_slices():
            assert file_slice.base_file is not None
            local = str(path / file_slice.base_file.path)
            assert BLOOM_FILTER_KEY in (pq.read_metadata(local).metadata or {})
            keys = pq.read_table(local, columns=[RECORD_KEY]).column(0).to_pylist()
            found = hudi.run("tests.hudi_java.bloom_filters:in_file", local, keys)
            assert found == [True] * len(keys)

    write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    write("upsert", [("k0", 20, "p0", 0.5), ("k1", 20, "p1", 1.5), ("k8", 20, "p0", 8.0)])
    compaction = schedule_compaction(HudiTable.open(str(path)))
    assert compaction is not None
    assert execute_compaction(spark, HudiTable.open(str(path)), compaction).state == "COMPLETED"
    keys_in_bloom_filters()
    write("upsert", [("k0", 30, "p0", 0.75), ("k2", 30, "p0", 2.5), ("k9", 30, "p1", 9.0)])
    reads_right()

    clustering = schedule_clustering(HudiTable.open(str(path)), small_file_limit=1 << 30)
    assert clustering is not None
    clustered = execute_clustering(spark, HudiTable.open(str(path)), clustering)
    assert clustered.state == "COMPLETED" and clustered.files_written > 0
    write("upsert", [("k1", 40, "p1", 1.75), ("k3", 40, "p1", 3.5), ("k10", 40, "p0", 10.0)])
    reads_right()
    compaction = schedule_compaction(HudiTable.open(str(path)))
    assert compaction is not None
    assert execute_compaction(spark, HudiTable.open(str(path)), compaction).state == "COMPLETED"
    keys_in_bloom_filters()
    write("upsert", [("k9", 50, "p1", 9.5), ("k11", 50, "p1", 11.0)])
    reads_right()


def bloom_entries(base: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The metadata table's `bloom_filters` entries of every base file on storage and of
    those the timeline ever named, by (partition, file name)."""
    reader = MetadataTableReader.open(Storage(base))
    names = [
        (p.parent.name, p.name) for p in Path(base).glob("*/*.parquet") if ".hoodie" not in p.parts
    ]
    keys = {bloom_filter_key(partition, name): (partition, name) for partition, name in names}
    found = reader.lookup(BLOOM_FILTERS, list(keys))
    return {keys[k]: record.bloom_filter() or {} for k, record in found.items()}


def entries_match_the_files(hudi: HudiSpark, base: str) -> None:
    """Every latest base file has its footer's filter in `bloom_filters`, under the instant
    that wrote it, and Hudi's metadata reader returns that filter, holding the file's keys."""
    entries = bloom_entries(base)
    table = HudiTable.open(base)
    files, footers = [], []
    for piece in table.file_system_view().latest_file_slices():
        assert piece.base_file is not None
        local = str(Path(base) / piece.base_file.path)
        footer = pq.read_metadata(local).metadata
        entry = entries.get((piece.partition_path, piece.base_file.file_name))
        assert entry is not None, piece.base_file.path
        assert entry["isDeleted"] is False and entry["type"] == "DYNAMIC_V0"
        assert entry["bloomFilter"] == footer[BLOOM_FILTER_KEY]
        assert entry["timestamp"] == piece.base_instant_time
        keys = pq.read_table(local, columns=[RECORD_KEY]).column(0).to_pylist()
        files.append((piece.partition_path, piece.base_file.file_name, keys))
        footers.append(footer[BLOOM_FILTER_KEY].decode())
    assert files
    read = hudi.run("tests.hudi_java.bloom_filters:in_metadata_table", base, files)
    assert read == footers


@pytest.mark.parametrize(
    "table_version", [pytest.param(6, marks=pytest.mark.extended), 9], ids=["v6", "v9"]
)
def test_the_bloom_filters_partition_is_kept_through_native_services(
    spark: Any, hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path, table_version: int
) -> None:
    """A table whose metadata table has `bloom_filters`: tms's compaction and clustering add
    the entries of the files they write, its clean marks those of the files it deletes; Hudi's
    metadata reader returns each latest file's filter, and Hudi's bloom-indexed writer writes
    on after each."""
    hudi = hudi_spark(HUDI_1_2)
    path = tmp_path / f"bloom_partition_v{table_version}"
    base = str(path)
    options = {
        **keyed_table(path.name),
        **HUDI_1_2.write_options(table_version),
        **SERVICES_OFF_THE_WRITER,
        "hoodie.index.type": "BLOOM",
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.index.bloom.filter.enable": "true",
        "hoodie.parquet.small.file.limit": "0",
    }
    model: dict[str, Row] = {}

    def write(operation: str, rows: list[Row]) -> None:
        hudi.write(path, rows, SCHEMA, {**options, "hoodie.datasource.write.operation": operation})
        model.update({row[0]: row for row in rows})

    def reads_right() -> None:
        assert hudi.read(path, COLUMNS) == sorted(model.values())
        assert hudi_rs_rows(base) == sorted(model.values())
        report = hudi.run("tests.hudi_java.metadata_check:compare", base)
        assert report["problems"] == [], report

    write("insert", [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)])
    write("upsert", [("k0", 20, "p0", 0.5), ("k1", 20, "p1", 1.5), ("k8", 20, "p0", 8.0)])
    assert BLOOM_FILTERS in HudiTable.open(base).config.metadata_partitions
    assert unsupported_features(HudiTable.open(base)) == []
    entries_match_the_files(hudi, base)  # as Hudi's writer keeps them

    compaction = schedule_compaction(HudiTable.open(base))
    assert compaction is not None
    assert execute_compaction(spark, HudiTable.open(base), compaction).state == "COMPLETED"
    entries_match_the_files(hudi, base)
    write("upsert", [("k0", 30, "p0", 0.75), ("k2", 30, "p0", 2.5), ("k9", 30, "p1", 9.0)])
    reads_right()

    clustering = schedule_clustering(HudiTable.open(base), small_file_limit=1 << 30)
    assert clustering is not None
    clustered = execute_clustering(spark, HudiTable.open(base), clustering)
    assert clustered.state == "COMPLETED" and clustered.files_written > 0
    entries_match_the_files(hudi, base)
    write("upsert", [("k1", 40, "p1", 1.75), ("k3", 40, "p1", 3.5), ("k10", 40, "p0", 10.0)])
    reads_right()

    before = {(p.parent.name, p.name) for p in path.glob("*/*.parquet") if ".hoodie" not in p.parts}
    clean = schedule_clean(HudiTable.open(base), policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    assert execute_clean(spark, HudiTable.open(base), clean).files_deleted > 0
    after = {(p.parent.name, p.name) for p in path.glob("*/*.parquet") if ".hoodie" not in p.parts}
    deleted = before - after
    assert deleted
    reader = MetadataTableReader.open(Storage(base))
    gone = reader.lookup(BLOOM_FILTERS, [bloom_filter_key(p, n) for p, n in deleted])
    assert len(gone) == len(deleted)
    assert all(r.bloom_filter() == {**TOMBSTONE, "timestamp": clean} for r in gone.values())
    entries_match_the_files(hudi, base)
    write("upsert", [("k9", 50, "p1", 9.5), ("k11", 50, "p1", 11.0), ("k4", 50, "p0", 4.5)])
    reads_right()
    assert HudiTable.open(base).config.table_version == table_version


TOMBSTONE = {"type": "", "bloomFilter": b"", "isDeleted": True}
"""A deleted base file's `bloom_filters` entry, as Hudi's clean writes it."""
