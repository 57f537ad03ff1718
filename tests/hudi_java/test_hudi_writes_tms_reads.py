"""Apache Hudi's Spark writer writes a merge-on-read table; tms's reader (the table, its
timeline, its file-system view and the merged file slices) and hudi-rs read what Hudi's own
reader reads.

Each table version a release writes: the newest Hudi 1.x writes 6, 8 and 9, and Hudi 0.15
writes 6 as the writers before 1.0 do. Three commits: an insert, an upsert (a newer version of
one key, a late version of another with a lower ordering value, a key in a new partition) that
lands in log files, and a delete.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests import oracle
from tests.hudi_java.support import HUDI_0_15, HUDI_1_2, HudiRelease, HudiSpark, keyed_table
from tms.hudi.files.reader import read_file_slice
from tms.hudi.merge_config import record_merging
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.table_refusals import unsupported_features

pytestmark = pytest.mark.hudi_java

SCHEMA = "key string, ts long, part string, val double"
COLUMNS = ["key", "ts", "part", "val"]
INSERT = [(f"k{i}", 10, f"p{i % 2}", float(i)) for i in range(8)]
UPSERT = [("k1", 20, "p1", 1.5), ("k2", 5, "p0", 2.5), ("k8", 10, "p2", 8.0)]
DELETE = [("k3", 30, "p1", 0.0)]

CASES = [
    (release, version) for release in (HUDI_1_2, HUDI_0_15) for version in release.table_versions
]

EACH_RELEASE_AND_VERSION = pytest.mark.parametrize(
    ("release", "table_version"),
    CASES,
    ids=[f"hudi-{release.version}-v{version}" for release, version in CASES],
)
"""Each table version each release writes."""


def expected_rows(late_update_wins: bool) -> list[tuple[Any, ...]]:
    rows = {row[0]: row for row in INSERT}
    rows["k1"] = UPSERT[0]
    if late_update_wins:
        rows["k2"] = UPSERT[1]
    rows["k8"] = UPSERT[2]
    del rows["k3"]
    return sorted(rows.values())


def write_table(hudi: HudiSpark, path: Path, table_version: int) -> None:
    options = {
        **keyed_table(path.name),
        **hudi.release.write_options(table_version),
    }
    hudi.write(path, INSERT, SCHEMA, {**options, "hoodie.datasource.write.operation": "insert"})
    hudi.write(path, UPSERT, SCHEMA, {**options, "hoodie.datasource.write.operation": "upsert"})
    hudi.write(path, DELETE, SCHEMA, {**options, "hoodie.datasource.write.operation": "delete"})


def tms_rows(table: HudiTable) -> list[tuple[Any, ...]]:
    """The merged rows of every latest file slice, read by tms."""
    timeline = table.timeline()
    ordering = record_merging(table.config).compared_fields
    slices = table.file_system_view(timeline).latest_file_slices()
    parts = [read_file_slice(table.storage, s, ordering, timeline.is_completed)[0] for s in slices]
    rows = pa.concat_tables([part.select(COLUMNS) for part in parts if part.num_rows])
    return sorted(tuple(row.values()) for row in rows.to_pylist())


def hudi_rs_rows(base_path: str) -> list[tuple[Any, ...]]:
    return sorted(
        tuple(row.values()) for row in oracle.snapshot(base_path).select(COLUMNS).to_pylist()
    )


@EACH_RELEASE_AND_VERSION
def test_hudi_writes_a_merge_on_read_table_that_tms_and_hudi_rs_read_alike(
    hudi_spark: Callable[[HudiRelease], HudiSpark],
    tmp_path: Path,
    release: HudiRelease,
    table_version: int,
) -> None:
    hudi = hudi_spark(release)
    path = tmp_path / f"mor_v{table_version}"
    write_table(hudi, path, table_version)
    base = str(path)

    table = HudiTable.open(base)
    assert table.config.table_version == table_version
    timeline = table.timeline()
    assert [i.action for i in timeline.completed()] == [Action.DELTA_COMMIT] * 3
    assert [(i.requested_time, i.action.value) for i in timeline.completed()] == (
        oracle.completed_instants(base)
    )
    assert unsupported_features(table, timeline) == []

    slices = [
        {
            k: v
            for k, v in s.describe().items()
            if k in ("partition", "file_id", "base_instant", "base_file", "log_files")
        }
        for s in table.file_system_view(timeline).latest_file_slices()
    ]
    assert sorted(slices, key=lambda s: (s["partition"], s["file_id"])) == oracle.file_slices(base)
    assert {s["partition"] for s in slices} == {"p0", "p1", "p2"}
    assert any(s["log_files"] for s in slices)  # the upsert and the delete went to log files

    # Hudi before 1.0 merges with its default payload, which keeps the later write; 1.x
    # orders by the ordering field (`ts`), and the late version of k2 loses
    expected = expected_rows(late_update_wins=release is HUDI_0_15)
    assert hudi.read(path, COLUMNS) == expected
    assert tms_rows(table) == expected
    assert hudi_rs_rows(base) == expected
