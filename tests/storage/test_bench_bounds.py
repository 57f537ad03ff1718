"""`bench/storage.py` derives its lower bounds from a run's own plans and metadata: a bound
that miscounts the files a compaction reads would make every ratio it prints wrong."""

from __future__ import annotations

from pathlib import Path

from bench.storage import (
    build_table,
    clean_bound,
    compaction_bound,
    path_class,
    plan_inputs,
    s3_kind,
)

from tms.hudi.table import HudiTable
from tms.services.compaction.execute import schedule_compaction


def test_a_compaction_bound_counts_every_file_of_the_planned_slices(tmp_path: Path) -> None:
    base = str(tmp_path / "trips")
    build_table(base, file_groups=8, rows_per_file=2, table_version=8)
    table = HudiTable.open(base)
    slices = table.file_system_view().latest_file_slices()
    instant_time = schedule_compaction(table)
    assert instant_time is not None
    timeline = table.timeline()
    instant = timeline.get(instant_time)
    assert instant is not None
    plan = timeline.compaction_plan(instant)

    files = sum(1 + len(s.log_files) for s in slices)
    assert len(slices) == 8 and all(s.base_file is not None and s.log_files for s in slices)
    assert plan_inputs(plan) == files
    assert compaction_bound(plan, timeline_files=3, files_written=8, partitions=4) == {
        "LIST": 1 + 4,
        "HEAD": 0,
        "GET": 3 + files,
        "PUT": 3 + 8,
        "DELETE": 0,
    }


def test_a_log_only_slice_reads_only_its_log_files() -> None:
    plan = {
        "operations": [
            {"dataFilePath": None, "deltaFilePaths": [".f1_001.log.1_0-1-0"]},
            {"dataFilePath": "f2_0-1-0_001.parquet", "deltaFilePaths": []},
        ]
    }
    assert plan_inputs(plan) == 2


def test_a_clean_bound_is_one_delete_per_file_deleted() -> None:
    metadata = {
        "partitionMetadata": {
            "berlin": {"successDeleteFiles": ["a.parquet", ".a.log.1_0-1-0"]},
            "denver": {"successDeleteFiles": ["b.parquet"]},
        }
    }
    assert clean_bound(metadata, timeline_files=3) == {
        "LIST": 3,
        "HEAD": 0,
        "GET": 2,
        "PUT": 3,
        "DELETE": 3,
    }


def test_requests_on_the_wire_are_classed_as_s3_bills_them() -> None:
    assert s3_kind("GET", "", {"list-type": ["2"]}) == "LIST"
    assert s3_kind("GET", "t/.hoodie/hoodie.properties", {}) == "GET"
    assert s3_kind("POST", "", {"delete": [""]}) == "DELETE"
    assert s3_kind("POST", "t/a.parquet", {"uploads": [""]}) == "PUT"
    assert s3_kind("HEAD", "t/a.parquet", {}) == "HEAD"
    assert path_class("t/.hoodie/.temp/001/berlin/a.parquet.marker.MERGE") == "marker"
    assert path_class("t/.hoodie/timeline/001.compaction.requested") == "timeline"
    assert path_class("t/.hoodie/.aux/.bootstrap") == "aux (bootstrap index)"
    assert path_class("t/berlin/.f1_001.log.1_0-1-0") == "log file"
