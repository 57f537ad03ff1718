"""Clustering against the oracle: the same records come back from fewer, larger file groups."""

from __future__ import annotations

import itertools
import posixpath
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hudi import HudiTable as OracleTable
from tests import oracle
from tests.services.timeline_files import timeline_dir
from tms.executor_choice import HUDI, NATIVE
from tms.hudi.actions import CLUSTERING
from tms.hudi.avro import codec as avro_codec
from tms.hudi.errors import PlanNotFoundError, UnsupportedTableError
from tms.hudi.files.codec import codec_of_footer
from tms.hudi.files.markers import TEMP_FOLDER
from tms.hudi.files.names import BaseFileName
from tms.hudi.meta_fields import COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable
from tms.hudi.timeline.heartbeat import HEARTBEAT_FOLDER
from tms.hudi.timeline.instant import Action
from tms.hudi.timeline.transitions import new_instant_time, request
from tms.services.clustering.execute import execute_clustering, schedule_clustering
from tms.services.clustering.plan import EXECUTION_STRATEGY, SORT_COLUMNS_PARAM
from tms.services.registry import ExecutorDecision, Work, table_service
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

ROWS = 1200
FILE_ROWS = 60  # 10 small file groups per partition


def trips(ids: range | list[int], ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:05d}" for i in ids]),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "region": pa.array([["eu", "us"][i % 2] for i in ids]),
            "fare": pa.array([(i * 7919 % 1000) / 10 + ts for i in ids]),
        }
    )


def small_files_table(
    tmp_path: Path,
    table_type: str,
    *,
    rows: int = ROWS,
    table_version: int = 6,
) -> str:
    """Many small file groups over two partitions, with updates and deletes applied (log files
    on a merge-on-read table, rewritten base files on copy-on-write)."""
    base = str(tmp_path / "trips")
    table = create_table(
        base,
        "trips",
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["region"],
        table_version=table_version,
    )
    writer = HudiWriter(table, max_file_rows=FILE_ROWS)
    writer.insert(trips(range(rows), ts=1))
    writer.upsert(trips(range(0, rows, 5), ts=4))
    writer.delete(trips(range(3, rows, 9), ts=6).select(["id", "region"]))
    return base


def group_target(base: str, slices_per_group: int = 4) -> int:
    """A target size that fits `slices_per_group` of the largest file slices."""
    view = HudiTable.open(base).file_system_view()
    return slices_per_group * max(s.total_size for s in view.latest_file_slices())


def commit_times(base: str) -> dict[str, str]:
    """Record key -> `_hoodie_commit_time`, as the oracle reads them."""
    rows = pa.Table.from_batches(OracleTable(base).read())
    keys = rows.column(RECORD_KEY).to_pylist()
    return dict(zip(keys, rows.column(COMMIT_TIME).to_pylist(), strict=True))


def plan_of(base: str, instant: str) -> dict[str, Any]:
    timeline = HudiTable.open(base).timeline()
    found = timeline.get(instant)
    assert found is not None
    requested = timeline.requested_replace_metadata(found)
    assert requested is not None
    return requested


def planned_file_ids(base: str, instant: str) -> set[str]:
    groups = plan_of(base, instant)["clusteringPlan"]["inputGroups"]
    return {piece["fileId"] for group in groups for piece in group["slices"]}


@pytest.mark.spark
@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
def test_clustering_keeps_every_record_in_fewer_file_groups(
    spark: Any, tmp_path: Path, table_type: str, table_version: int
) -> None:
    base = small_files_table(tmp_path, table_type, table_version=table_version)
    before = oracle.snapshot(base)
    times_before = commit_times(base)
    slices_before = oracle.file_slices(base)
    if table_type == MERGE_ON_READ:
        assert any(s["log_files"] for s in slices_before)

    instant = schedule_clustering(HudiTable.open(base), target_file_size=group_target(base))
    assert instant is not None
    replaced = planned_file_ids(base, instant)
    result = execute_clustering(spark, HudiTable.open(base), instant, heartbeat_interval=1)

    after = oracle.snapshot(base)
    assert after.num_rows == before.num_rows > 0
    assert after.equals(before)
    assert commit_times(base) == times_before, "clustering keeps each record's commit time"
    slices_after = oracle.file_slices(base)
    assert len(slices_after) < len(slices_before)
    assert not replaced & {s["file_id"] for s in slices_after}
    new = [s for s in slices_after if s["base_instant"] == instant]
    assert len(new) == result.files_written > 0
    assert all(not s["log_files"] for s in new)
    assert {s["partition"] for s in new} == {"eu", "us"}
    for written in new:  # the codec of the files rewritten, as the table's writer chose it
        footer = pq.read_metadata(Path(base) / written["partition"] / written["base_file"])
        assert codec_of_footer(footer) == "snappy"
    assert (instant, "replacecommit") in oracle.completed_instants(base)
    assert result.state == "COMPLETED"
    assert result.file_groups == len(replaced)
    if table_type == MERGE_ON_READ:
        assert result.log_files_compacted > 0 and result.log_records_compacted > 0
    assert not (Path(base) / TEMP_FOLDER / instant).exists()
    assert not (Path(base) / HEARTBEAT_FOLDER / instant).exists()


@pytest.mark.spark
@pytest.mark.parametrize(
    ("sort_columns", "ordered_by"), [(["fare"], "fare"), ([], RECORD_KEY)], ids=["fare", "key"]
)
def test_sort_columns_order_the_rows_of_each_new_file(
    spark: Any, tmp_path: Path, table_version: int, sort_columns: list[str], ordered_by: str
) -> None:
    """Without sort columns, the rows are ordered by record key, as one task orders them."""
    base = small_files_table(tmp_path, MERGE_ON_READ, table_version=table_version)
    before = oracle.snapshot(base)
    # a group per partition, larger than the target: each is written as several files
    instant = schedule_clustering(
        HudiTable.open(base),
        target_file_size=group_target(base, 3),
        max_bytes_per_group=group_target(base, 20),
        sort_columns=sort_columns,
    )
    assert instant is not None
    groups = plan_of(base, instant)["clusteringPlan"]["inputGroups"]
    assert len(groups) == 2 and all(group["numOutputFileGroups"] > 1 for group in groups)
    execute_clustering(spark, HudiTable.open(base), instant)

    assert oracle.snapshot(base).equals(before)
    new = [s for s in oracle.file_slices(base) if s["base_instant"] == instant]
    assert len(new) > len(groups), "groups bigger than the target become several files"
    ranges: dict[str, list[tuple[Any, Any]]] = {}
    for piece in new:
        rows = pq.read_table(posixpath.join(base, piece["partition"], piece["base_file"]))
        values = rows.column(ordered_by).to_pylist()
        assert values == sorted(values)
        assert set(rows.column(FILE_NAME).to_pylist()) == {piece["base_file"]}
        assert set(rows.column(PARTITION_PATH).to_pylist()) == {piece["partition"]}
        ranges.setdefault(piece["partition"], []).append((values[0], values[-1]))
    for found in ranges.values():  # each group's rows sorted across its files
        found.sort()
        assert all(low[1] <= high[0] for low, high in itertools.pairwise(found))
    # a group asking for several output file groups is written by as many Spark tasks
    tokens = {BaseFileName.parse(piece["base_file"]).write_token for piece in new}  # type: ignore[union-attr]
    assert len(tokens) > len(groups)


def test_plan_groups_small_file_slices_as_hudi_reads_them(
    tmp_path: Path, table_version: int
) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, table_version=table_version)
    target = group_target(base)
    instant = schedule_clustering(HudiTable.open(base), target_file_size=target)
    assert instant is not None
    requested_as = "replacecommit" if table_version == 6 else "clustering"
    assert (timeline_dir(base) / f"{instant}.{requested_as}.requested").is_file()
    requested = plan_of(base, instant)
    assert requested["operationType"] == "CLUSTER"
    plan = requested["clusteringPlan"]
    assert plan["strategy"]["strategyClassName"] == EXECUTION_STRATEGY
    assert plan["preserveHoodieMetadata"] is True
    assert SORT_COLUMNS_PARAM not in plan["strategy"]["strategyParams"]
    view = HudiTable.open(base).file_system_view()
    sizes = {s.file_id: s.total_size for s in view.latest_file_slices()}
    for group in plan["inputGroups"]:
        pieces = group["slices"]
        assert len(pieces) > 1
        assert len({p["partitionPath"] for p in pieces}) == 1
        assert sum(sizes[p["fileId"]] for p in pieces) <= target
        assert group["numOutputFileGroups"] == 1
        for piece in pieces:  # full paths, as Hudi's executor opens them
            assert Path(piece["dataFilePath"]).is_file()
            assert Path(piece["dataFilePath"]).parent.name == piece["partitionPath"]
            assert piece["deltaFilePaths"] and all(
                Path(p).is_file() for p in piece["deltaFilePaths"]
            )
    assert len(plan["inputGroups"]) >= 4
    # the plan's file groups are taken: a second schedule leaves them out
    again = schedule_clustering(HudiTable.open(base), target_file_size=target)
    if again is not None:
        assert not planned_file_ids(base, again) & planned_file_ids(base, instant)


def test_file_group_in_pending_compaction_is_left_out(tmp_path: Path, table_version: int) -> None:
    base = small_files_table(tmp_path, MERGE_ON_READ, table_version=table_version)
    table = HudiTable.open(base)
    timeline = table.timeline()
    busy = next(s for s in table.file_system_view().latest_file_slices() if s.log_files)
    compaction = {
        "operations": [
            {
                "baseInstantTime": busy.base_instant_time,
                "deltaFilePaths": [log.file_name for log in busy.log_files],
                "dataFilePath": busy.base_file.file_name if busy.base_file else None,
                "fileId": busy.file_id,
                "partitionPath": busy.partition_path,
                "metrics": {},
                "bootstrapFilePath": None,
            }
        ],
        "extraMetadata": {},
        "version": 2,
    }
    request(
        table.storage,
        table.config,
        new_instant_time(timeline.instants),
        Action.COMPACTION,
        avro_codec.encode("HoodieCompactionPlan", compaction),
    )
    instant = schedule_clustering(HudiTable.open(base), target_file_size=group_target(base, 20))
    assert instant is not None
    planned = planned_file_ids(base, instant)
    assert busy.file_id not in planned
    assert len(planned) == ROWS // FILE_ROWS - 1


def test_nothing_to_cluster_gives_none_and_writes_nothing(
    tmp_path: Path, table_version: int
) -> None:
    base = small_files_table(
        tmp_path, COPY_ON_WRITE, rows=2 * FILE_ROWS, table_version=table_version
    )
    instants = HudiTable.open(base).timeline().instants
    # one file group per partition: clustering would not reduce the file count
    assert schedule_clustering(HudiTable.open(base), target_file_size=1 << 30) is None
    # file groups above the small file limit are not candidates either
    bigger = small_files_table(tmp_path / "big", COPY_ON_WRITE, table_version=table_version)
    assert schedule_clustering(HudiTable.open(bigger), small_file_limit=100) is None
    assert HudiTable.open(base).timeline().instants == instants


def test_unknown_sort_column_is_refused_by_name(tmp_path: Path, table_version: int) -> None:
    base = small_files_table(tmp_path, COPY_ON_WRITE, table_version=table_version)
    with pytest.raises(ValueError, match=r"unknown sort column\(s\) no_such_column;"):
        schedule_clustering(HudiTable.open(base), sort_columns=["fare", "no_such_column"])
    assert not HudiTable.open(base).timeline().pending()


def test_unsupported_table_is_refused_before_anything_is_written(
    tmp_path: Path, table_version: int
) -> None:
    base = str(tmp_path / "t")
    table = create_table(
        base,
        "t",
        record_key_fields=["id"],
        ordering_field="ts",
        extra_properties={"hoodie.table.metadata.partitions": "files"},
        table_version=table_version,
    )
    HudiWriter(table, max_file_rows=10).insert(trips(range(50), ts=1))
    with pytest.raises(UnsupportedTableError, match="metadata table"):
        schedule_clustering(HudiTable.open(base))
    assert not HudiTable.open(base).timeline().pending()


def test_executing_what_is_not_a_pending_clustering_plan_fails(
    tmp_path: Path, table_version: int
) -> None:
    base = small_files_table(tmp_path, COPY_ON_WRITE, table_version=table_version)
    commit = HudiTable.open(base).timeline().instants[0].requested_time
    no_spark: Any = None  # refused before any Spark work starts
    with pytest.raises(PlanNotFoundError, match="already completed"):
        execute_clustering(no_spark, HudiTable.open(base), commit)
    with pytest.raises(PlanNotFoundError, match="no replacecommit"):
        execute_clustering(no_spark, HudiTable.open(base), "20990101000000000")


def test_a_sort_column_tms_cannot_order_is_refused_and_auto_hands_it_to_hudi(
    tmp_path: Path, table_version: int
) -> None:
    """A list column: Arrow's sort cannot order it, so tms's own planner refuses it by name
    before anything is written, and `auto` gives the operation to Hudi's code, saying why."""
    base = str(tmp_path / "t")
    table = create_table(
        base, "t", record_key_fields=["id"], ordering_field="ts", table_version=table_version
    )
    rows = trips(range(40), ts=1)
    rows = rows.append_column("tags", pa.array([["a", str(i % 3)] for i in range(40)]))
    HudiWriter(table, max_file_rows=10).insert(rows)

    with pytest.raises(ValueError, match=r"sort column\(s\) tags \(list<.+cannot be ordered"):
        schedule_clustering(HudiTable.open(base), sort_columns=["fare", "tags"])
    assert not HudiTable.open(base).timeline().pending()

    service = table_service(CLUSTERING)
    by_tags = service.decide(HudiTable.open(base), "auto", Work({"sort_columns": ["tags"]}))
    assert by_tags.executor == HUDI
    assert by_tags.native_declined is not None and "tags (list<" in by_tags.native_declined
    by_fare = service.decide(HudiTable.open(base), "auto", Work({"sort_columns": ["fare"]}))
    assert by_fare == ExecutorDecision(NATIVE)
