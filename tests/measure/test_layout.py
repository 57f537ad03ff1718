"""What tms measures of a table's layout, on real tables: Apache Hudi's own copy-on-write
fixture (base files only, sizes as Hudi wrote them) and merge-on-read tables of the sample
writer with log files, a pending compaction among them. Expected figures are taken from the
files on disk (`os.walk`), not from the view the measurement reads."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from tests.hudi.test_fixture_views import unzip_fixture
from tms.hudi.properties import MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.measure import DEFAULT_SMALL_FILE_LIMIT, measure_table, percentile, spread
from tms.services.compaction.plan import schedule_compaction
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

CITIES = ["sf", "nyc", "la"]


def rows(ids: list[int] | range, ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:03d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "city": pa.array([CITIES[i % 3] for i in ids]),
            "fare": pa.array([float(i) for i in ids]),
        }
    )


def mor_table(tmp_path: Path) -> tuple[str, HudiWriter]:
    """30 keys in 6 file groups (2 per city); sf's first group gets 2 log files, nyc's 1."""
    base = str(tmp_path / "trips")
    table = create_table(
        base,
        "trips",
        table_type=MERGE_ON_READ,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
    )
    writer = HudiWriter(table, max_file_rows=5)
    writer.insert(rows(range(30), ts=1))
    writer.upsert(rows([0, 3, 6], ts=2))
    writer.upsert(rows([0, 3], ts=3))
    writer.upsert(rows([1], ts=4))
    return base, writer


def files_on_disk(base: str) -> tuple[list[int], dict[str, list[int]]]:
    """Sizes of the parquet base files, and of the log files by file id."""
    bases: list[int] = []
    logs: dict[str, list[int]] = {}
    for folder, dirs, names in os.walk(base):
        dirs[:] = [d for d in dirs if d != ".hoodie"]
        for name in names:
            size = os.path.getsize(os.path.join(folder, name))
            if name.endswith(".parquet"):
                bases.append(size)
            elif ".log." in name:
                logs.setdefault(name[1:].split("_", 1)[0], []).append(size)
    return bases, logs


def test_hudis_copy_on_write_fixture_measured_as_its_files_are(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_nometa", tmp_path)
    found = measure_table(HudiTable.open(str(root)))
    assert (found.partitions, found.file_slices, found.slices_with_log_files) == (3, 5, 0)
    assert found.base_file_bytes.to_dict() == {
        "count": 5,
        "total": 436682 + 436858 + 436884 + 438344 + 438363,
        "p5": 436682,
        "p50": 436884,
        "p95": 438363,
        "max": 438363,
    }
    assert found.log_files_per_slice.max == found.log_bytes_per_slice.total == 0
    # Every base file is under Hudi's 100 MiB default: eu and us hold two each, apac one.
    assert (found.small_file_limit, found.small_file_limit_source) == (104857600, "default")
    assert found.small_files == 5 and found.small_file_bytes == found.base_file_bytes.total
    assert [p.to_dict() for p in found.worst_partitions] == [
        {"partition": "region=eu", "small_files": 2, "base_files": 2},
        {"partition": "region=us", "small_files": 2, "base_files": 2},
        {"partition": "region=apac", "small_files": 1, "base_files": 1},
    ]


def test_the_policys_small_file_limit_decides_which_files_are_small(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_nometa", tmp_path)
    found = measure_table(HudiTable.open(str(root)), policy_limit=436884)
    assert (found.small_file_limit, found.small_file_limit_source) == (436884, "policy")
    assert found.small_files == 2 and found.small_file_bytes == 436682 + 436858
    assert [p.to_dict() for p in found.worst_partitions] == [
        {"partition": "region=apac", "small_files": 1, "base_files": 1},
        {"partition": "region=eu", "small_files": 1, "base_files": 2},
    ]


def test_the_tables_own_small_file_limit_stands_when_the_policy_sets_none(
    tmp_path: Path,
) -> None:
    root = unzip_fixture("cow_v8_nonpartitioned", tmp_path)
    properties = root / ".hoodie" / "hoodie.properties"
    properties.write_text(properties.read_text() + "hoodie.parquet.small.file.limit=1000\n")
    found = measure_table(HudiTable.open(str(root)))
    assert (found.small_file_limit, found.small_file_limit_source) == (1000, "table")
    assert (found.partitions, found.file_slices, found.small_files) == (1, 1, 0)
    assert found.base_file_bytes.p50 == 441515 and found.worst_partitions == ()


def test_log_files_per_slice_and_what_a_snapshot_read_merges(tmp_path: Path) -> None:
    base, _ = mor_table(tmp_path)
    bases, logs = files_on_disk(base)
    found = measure_table(HudiTable.open(base))
    assert (found.partitions, found.file_slices, found.slices_with_log_files) == (3, 6, 2)
    assert sorted(len(sizes) for sizes in logs.values()) == [1, 2]
    # six slices: four without logs, one with 1, one with 2 (nearest rank: p95 is the 6th).
    assert found.log_files_per_slice.to_dict() == {
        "count": 6,
        "total": 3,
        "p5": 0,
        "p50": 0,
        "p95": 2,
        "max": 2,
    }
    per_slice = sorted(sum(sizes) for sizes in logs.values())
    assert found.log_bytes_per_slice.max == found.log_bytes_per_slice.p95 == per_slice[-1]
    assert found.log_bytes_per_slice.p50 == 0
    assert found.read_log_files == 3 and found.read_log_bytes == sum(per_slice)
    assert found.base_file_bytes.total == sum(bases) and found.base_file_bytes.count == 6
    assert found.to_dict()["read_amplification"] == {
        "log_files": 3,
        "log_bytes": sum(per_slice),
        "small_files": 6,
    }


def test_logs_written_behind_a_pending_compaction_count_with_the_slice_they_extend(
    tmp_path: Path,
) -> None:
    """A snapshot read merges the compacted slice's logs and those written after the plan:
    the slice counts once, with all of them."""
    base, writer = mor_table(tmp_path)
    assert schedule_compaction(HudiTable.open(base)) is not None
    writer.upsert(rows([0], ts=5))
    _, logs = files_on_disk(base)
    found = measure_table(HudiTable.open(base))
    assert found.file_slices == 6 and found.log_files_per_slice.max == 3
    assert found.read_log_files == 4
    assert found.read_log_bytes == sum(sum(sizes) for sizes in logs.values())


def test_nearest_rank_percentiles_are_values_of_the_data() -> None:
    assert percentile([7], 5) == percentile([7], 100) == 7
    assert [percentile(list(range(1, 21)), p) for p in (5, 50, 95, 100)] == [1, 10, 19, 20]
    assert spread([]).to_dict() == dict.fromkeys(("count", "total", "p5", "p50", "p95", "max"), 0)
    assert spread([3, 1, 2]).to_dict() == {
        "count": 3,
        "total": 6,
        "p5": 1,
        "p50": 2,
        "p95": 3,
        "max": 3,
    }
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 0)
    assert DEFAULT_SMALL_FILE_LIMIT == 100 * 1024 * 1024
