"""Building metadata partitions (`tms.hudi.metadata.index_build`): what may be built, how many
file groups, and the index definitions of what was built."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.hudi.test_fixture_views import unzip_fixture
from tests.hudi.test_writer_metadata_table import new_table as writer_table
from tests.hudi.test_writer_metadata_table import write_history

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.spilled_slice import SliceMerge
from tms.hudi.metadata.index_build import (
    BUILDABLE,
    IndexSpec,
    build_partitions,
    catch_up,
    estimate_file_group_count,
    index_definitions,
    index_spec,
    slices,
)
from tms.hudi.metadata.index_build.changes import changes_of
from tms.hudi.metadata.index_build.slices import SliceReading, latest_slices
from tms.hudi.metadata.index_defs import IndexVersion, read_index_definitions
from tms.hudi.metadata.stats_values import ValueType
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Instant

BUDGET = 1 << 30
"""Every task's memory budget: refusals come before any task runs."""


def new_table(root: Path, table_type: str = COPY_ON_WRITE, version: int = 9) -> HudiTable:
    partitions = ("files",) if version >= 8 else ()
    return writer_table(root, table_type, version, partitions).table


def refusal(table: HudiTable, partitions: list[str]) -> str:
    with pytest.raises(UnsupportedTableError) as caught:
        index_spec(table, table.timeline(), partitions)
    return str(caught.value)


def test_names_outside_the_buildable_partitions_are_refused(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    message = refusal(table, ["files", "bloom_filters", "record_index"])
    assert "bloom_filters cannot be built" in message
    assert "files is built alone" in message
    assert "no metadata partition" in refusal(table, [])
    assert "named twice" in refusal(table, ["record_index", "record_index"])


def test_partition_stats_without_column_stats_is_refused(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    assert "partition_stats needs column_stats" in refusal(table, ["partition_stats"])
    spec = index_spec(table, table.timeline(), ["partition_stats", "column_stats"])
    assert spec.partitions == ("column_stats", "partition_stats")


def test_stats_on_a_merge_on_read_table_are_refused(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t", MERGE_ON_READ)
    message = refusal(table, ["column_stats", "partition_stats", "record_index"])
    assert "column_stats, partition_stats on a merge-on-read table" in message
    assert index_spec(table, table.timeline(), ["record_index"]) == IndexSpec(("record_index",))


def test_partition_stats_is_refused_on_version_6(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t", version=6)
    assert "table version 6 has no partition_stats" in refusal(table, ["partition_stats"])


def test_record_index_on_virtual_keys_needs_keys_we_can_compute(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    config = TableConfig(
        {
            **table.config.props,
            "hoodie.populate.meta.fields": "false",
            "hoodie.table.keygenerator.type": "USER_PROVIDED",
        }
    )
    config.save(table.storage)
    table = HudiTable.open(table.base_path)
    message = refusal(table, ["record_index"])
    assert message.startswith("cannot build the index: record_index: key generator")


def test_the_columns_are_the_definitions_else_hudis_defaults(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path)
    table = HudiTable.open(str(root))
    spec = index_spec(table, table.timeline(), ["partition_stats"])
    defined = read_index_definitions(table.storage, table.config)["column_stats"]
    assert spec.columns == defined.source_fields
    assert spec.version is IndexVersion.V2
    assert spec.types["amount"] == (ValueType.DECIMAL, 15, 2)

    fresh = new_table(tmp_path / "t")
    spec = index_spec(fresh, fresh.timeline(), ["column_stats"])
    meta = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
    assert spec.columns == (*meta, "id", "ts", "city", "fare")
    assert spec.version is IndexVersion.V2
    assert spec.types["fare"] == (ValueType.DOUBLE, 0, 0)
    v8 = new_table(tmp_path / "v8", version=8)
    assert index_spec(v8, v8.timeline(), ["column_stats"]).version is IndexVersion.V1


def test_index_definitions_are_written_as_the_fixture_has_them(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path)
    table = HudiTable.open(str(root))
    spec = index_spec(table, table.timeline(), [p for p in BUILDABLE if p != "files"])
    raw = Storage(str(root)).read_bytes(".hoodie/.index_defs/index.json")
    import json

    fixture = json.loads(raw)["indexDefinitions"]
    assert index_definitions(spec, table.config.table_version) == {
        "record_index": fixture["record_index"],
        "column_stats": fixture["column_stats"],
    }


@pytest.mark.parametrize(
    ("records", "expected"),
    [(0, 10), (1_000, 10), (120_000_000, 10), (150_000_000, 13), (10**12, 10000)],
)
def test_record_index_file_groups_follow_hudis_estimate(records: int, expected: int) -> None:
    # 1 GiB / 48 B = 22,369,621 records per file group, for twice the records written
    assert estimate_file_group_count(records) == expected
    assert estimate_file_group_count(records, min_count=4, max_count=4) == 4


def test_a_build_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path)
    table = HudiTable.open(str(root))
    timeline = table.timeline()
    spec = index_spec(table, timeline, ["record_index"])
    metadata = root / ".hoodie" / "metadata"
    before = sorted(str(p) for p in metadata.rglob("*"))

    def refused(instant_time: str = "20991231235959999") -> str:
        with pytest.raises(UnsupportedTableError) as caught:
            build_partitions(
                None,
                table,
                spec,
                as_of="20991231235959998",
                instant_time=instant_time,
                memory_budget=BUDGET,
            )
        assert sorted(str(p) for p in metadata.rglob("*")) == before
        return str(caught.value)

    assert "metadata partition record_index is already built" in refused()
    assert "already has instant 00000000000000004" in refused("00000000000000004")
    kept = [p for p in table.config.metadata_partitions if p != "record_index"]
    TableConfig({**table.config.props, "hoodie.table.metadata.partitions": ",".join(kept)}).save(
        table.storage
    )
    table = HudiTable.open(str(root))
    assert "record_index already has a folder (abort first)" in refused()

    bare = writer_table(tmp_path / "bare", COPY_ON_WRITE, 9, ()).table
    with pytest.raises(UnsupportedTableError, match="has no metadata table"):
        build_partitions(None, bare, spec, as_of="1", instant_time="2", memory_budget=BUDGET)


def test_a_catch_up_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path)
    table = HudiTable.open(str(root))
    timeline = table.timeline()
    commits = [i for i in timeline.completed() if i.action.value == "commit"]
    indexing = [i for i in timeline.completed() if i.action.value == "indexing"]
    assert commits and indexing
    spec = index_spec(table, timeline, ["record_index"])
    metadata = root / ".hoodie" / "metadata"
    before = sorted(str(p) for p in metadata.rglob("*"))
    since, until = commits[0].requested_time, commits[-1].requested_time

    def catch_up_of(instants: list[Instant], instant_time: str) -> None:
        catch_up(
            None,
            table,
            spec,
            instants,
            since=since,
            until=until,
            instant_time=instant_time,
            memory_budget=BUDGET,
        )

    with pytest.raises(ValueError, match=f"instants {since} are not after {since}"):
        catch_up_of(commits, "1")
    with pytest.raises(ValueError, match="not applied by a catch-up"):
        changes_of(timeline, indexing)
    with pytest.raises(UnsupportedTableError, match="already has instant 00000000000000004"):
        catch_up_of(commits[1:], "0" * 16 + "4")
    shutil.rmtree(metadata / "record_index")
    with pytest.raises(UnsupportedTableError, match="record_index has no file groups"):
        catch_up_of(commits[1:], "2")
    assert sorted(str(p) for p in metadata.rglob("*") if "record_index" not in str(p)) == [
        p for p in before if "record_index" not in p
    ]


def test_changes_name_the_file_groups_files_and_partitions_of_the_instants(tmp_path: Path) -> None:
    root = unzip_fixture("cow_v9_txns_simple_meta", tmp_path)
    timeline = HudiTable.open(str(root)).timeline()
    replace = next(i for i in timeline.completed() if i.action.value == "replacecommit")
    changes = changes_of(timeline, [replace])
    commit = timeline.commit_metadata(replace)
    written = {
        (p, s.file_id) for p, stats in commit.partition_to_write_stats.items() for s in stats
    }
    replaced = {(p, f) for p, ids in commit.partition_to_replace_file_ids.items() for f in ids}  # type: ignore[attr-defined]
    assert replaced and written
    assert changes.file_groups == written | replaced
    assert set(changes.new_files.values()) == {
        s.path for stats in commit.partition_to_write_stats.values() for s in stats
    }
    assert changes.partitions == {p for p, _ in written | replaced}
    assert not changes.deleted_files


def test_a_slices_live_keys_are_the_same_merged_through_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record index's keys of a merge-on-read slice, within a budget far below the
    slice's size: the keys of merging it in memory, with the slice merged bucket by bucket."""
    writer = writer_table(tmp_path / "mor", MERGE_ON_READ, 9, ("files",))
    write_history(writer)  # updates and deletes in log files
    table = HudiTable.open(str(tmp_path / "mor"))
    timeline = table.timeline()
    with_logs = [s for s in latest_slices(table, timeline) if s.log_files]
    assert with_logs, "updates and deletes went to log files"
    spilled: list[bool] = []
    real_merge = slices.merge_file_slice

    def noting(*args: object, **kwargs: object) -> SliceMerge:
        merge = real_merge(*args, **kwargs)  # type: ignore[arg-type]
        spilled.append(merge.spilled)
        return merge

    monkeypatch.setattr(slices, "merge_file_slice", noting)
    for file_slice in with_logs:
        in_memory = SliceReading.of(table, timeline, memory_budget=BUDGET)
        on_disk = SliceReading.of(table, timeline, memory_budget=16 * 1024)
        expected = sorted(in_memory.record_keys(file_slice))
        assert expected
        assert sorted(on_disk.record_keys(file_slice)) == expected
    assert spilled == [False, True] * len(with_logs)
