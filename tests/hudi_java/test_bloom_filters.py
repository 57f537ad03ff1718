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
from tms.hudi.table import HudiTable
from tms.services.clustering.execute import execute_clustering
from tms.services.clustering.plan import schedule_clustering
from tms.services.compaction.execute import execute_compaction
from tms.services.compaction.plan import schedule_compaction

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
