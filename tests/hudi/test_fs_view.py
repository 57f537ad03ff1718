"""The file-system view against the oracle: latest file slices of writer-made and hand-changed
tables."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests import oracle
from tests.hudi.test_timeline import (
    compaction_plan,
    new_table,
    next_time,
    put,
    request_compaction,
    write,
)

from hudi import HudiFileGroupReader
from hudi import HudiTable as OracleTable
from tms.hudi.avro.commit_metadata import CommitMetadata, ReplaceCommitMetadata
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.files.data import read_base_file, write_base_file
from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.files.names import PARTITION_METADATA, BaseFileName, LogFileName
from tms.hudi.meta_fields import FILE_NAME
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ
from tms.hudi.table import HudiTable

SLICE_KEYS = ("partition", "file_id", "base_instant", "base_file", "log_files")


def view(base: str) -> FileSystemView:
    return HudiTable.open(base).file_system_view()


def our_slices(base: str) -> list[dict[str, Any]]:
    """`FileSystemView.describe()` in the oracle helper's shape and order."""
    rows = [{k: s[k] for k in SLICE_KEYS} for s in view(base).describe()]
    return sorted(rows, key=lambda s: (s["partition"], s["file_id"]))


def assert_same_slices_as_oracle(base: str) -> list[dict[str, Any]]:
    ours = our_slices(base)
    assert ours == oracle.file_slices(base)
    return ours


def schema_of(base: str) -> dict[str, str]:
    """Extra metadata naming the table's schema, as every commit of a writer carries."""
    return {"schema": HudiTable.open(base).timeline().latest_schema() or ""}


def copy_base_file(base: str, source: str, file_id: str, instant: str) -> str:
    """A new base file (relative path) holding the rows of `source`, as a rewrite would."""
    partition = str(Path(source).parent) if "/" in source else ""
    name = str(BaseFileName(file_id, "0-2-0", instant))
    path = f"{partition}/{name}" if partition else name
    storage = HudiTable.open(base).storage
    data = read_base_file(storage, source)
    data = data.set_column(4, FILE_NAME, pa.array([name] * data.num_rows, pa.string()))
    write_base_file(storage, path, data)
    return path


@pytest.mark.parametrize("table_type", [COPY_ON_WRITE, MERGE_ON_READ])
@pytest.mark.parametrize("partitioned", [True, False])
def test_latest_slices_of_writer_tables_equal_the_oracle(
    tmp_path: Path, table_type: str, partitioned: bool
) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, table_type, partitioned)
    write(writer, "insert", range(150), 1)
    write(writer, "upsert", range(0, 150, 4), 2)
    write(writer, "upsert", range(150, 170), 3)
    write(writer, "delete", range(0, 150, 10), 4)
    write(writer, "upsert", range(1, 150, 6), 5)

    slices = assert_same_slices_as_oracle(base)
    assert len(slices) >= 4
    assert all(s["base_file"] for s in slices)
    if table_type == MERGE_ON_READ:
        assert max(len(s["log_files"]) for s in slices) >= 2
    else:
        assert not any(s["log_files"] for s in slices)
        # copy-on-write keeps older versions: the view must pick the latest of each group
        assert any(len(g.slices) > 1 for g in view(base).file_groups)
    assert view(base).partitions == (("la", "nyc", "sf") if partitioned else ("",))


def test_base_files_of_pending_or_unknown_commits_are_ignored(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, COPY_ON_WRITE, partitioned=True)
    write(writer, "insert", range(60), 1)
    write(writer, "upsert", range(0, 60, 5), 2)
    before = assert_same_slices_as_oracle(base)
    rows_before = oracle.rows_by_key(base)
    victim = view(base).latest_file_slices("sf")[0]
    assert victim.base_file is not None

    inflight = next_time(base)
    put(base, f"{inflight}.commit.requested")
    put(base, f"{inflight}.inflight")
    added_id = "00000000-0000-0000-0000-00000000000a-0"
    rewritten = copy_base_file(base, victim.base_file.path, victim.file_id, inflight)
    added = copy_base_file(base, victim.base_file.path, added_id, inflight)
    crashed = next_time(base)  # a writer that died before its instant reached the timeline
    copy_base_file(base, victim.base_file.path, "00000000-0000-0000-0000-00000000000b-0", crashed)

    assert assert_same_slices_as_oracle(base) == before
    assert oracle.rows_by_key(base) == rows_before
    group = next(g for g in view(base).groups_in("sf") if g.file_id == victim.file_id)
    assert inflight not in [s.base_instant_time for s in group.slices]

    # once the commit completes, its base files are the latest slices
    stats = CommitMetadata(operation_type="UPSERT", extra_metadata=schema_of(base))
    for file_id, path in ((victim.file_id, rewritten), (added_id, added)):
        stats.add_write_stat("sf", WriteStat(file_id=file_id, path=path, partition_path="sf"))
    put(base, f"{inflight}.commit", stats.to_json())
    after = {s["file_id"]: s for s in assert_same_slices_as_oracle(base)}
    assert after[victim.file_id]["base_instant"] == inflight
    assert added_id in after
    assert "00000000-0000-0000-0000-00000000000b-0" not in after


def test_completed_replacecommit_hides_the_file_groups_it_replaced(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, COPY_ON_WRITE, partitioned=True)
    write(writer, "insert", range(200), 1)
    rows_before = oracle.rows_by_key(base)
    groups = view(base).groups_in("nyc")
    assert len(groups) >= 2, "40 rows a file: nyc's 67 rows take two file groups"
    replaced = groups[:2]

    # cluster two nyc file groups into one new group, by hand
    ts = next_time(base)
    new_id = "00000000-0000-0000-0000-0000000000c1-0"
    storage = HudiTable.open(base).storage
    inputs = [g.latest_slice.base_file for g in replaced]
    merged = pa.concat_tables([read_base_file(storage, f.path) for f in inputs if f is not None])
    name = str(BaseFileName(new_id, "0-3-0", ts))
    merged = merged.set_column(4, FILE_NAME, pa.array([name] * merged.num_rows))
    write_base_file(storage, f"nyc/{name}", merged)
    metadata = ReplaceCommitMetadata(
        operation_type="CLUSTER",
        extra_metadata=schema_of(base),
        partition_to_replace_file_ids={"nyc": [g.file_id for g in replaced]},
    )
    metadata.add_write_stat(
        "nyc",
        WriteStat(file_id=new_id, path=f"nyc/{name}", prev_commit="null", partition_path="nyc"),
    )
    put(base, f"{ts}.replacecommit.requested")
    put(base, f"{ts}.replacecommit.inflight")
    # while pending, the replaced groups are still the table and the new one is invisible
    pending_ids = {s["file_id"] for s in assert_same_slices_as_oracle(base)}
    assert {g.file_id for g in replaced} <= pending_ids and new_id not in pending_ids

    put(base, f"{ts}.replacecommit", metadata.to_json())
    got = view(base)
    ids = {s.file_id for s in got.latest_file_slices()}
    assert new_id in ids
    assert not ids & {g.file_id for g in replaced}
    assert {("nyc", g.file_id) for g in replaced} <= got.replaced_file_ids
    assert_same_slices_as_oracle(base)
    assert oracle.rows_by_key(base) == rows_before


def test_stray_files_and_folders_in_partitions_are_ignored(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, MERGE_ON_READ, partitioned=True)
    write(writer, "insert", range(30), 1)
    write(writer, "upsert", range(0, 30, 2), 2)
    before = assert_same_slices_as_oracle(base)
    sf = Path(base) / "sf"
    log = next(p.name for p in sf.iterdir() if p.name.startswith(".") and ".log." in p.name)
    for stray in (
        "README.txt",
        "_SUCCESS",
        "part-00000-3f1e-4c1a.c000.snappy.parquet",
        f".{log}.crc",
        f"{log[1:]}.tmp",
        "notes_1-2-3.txt",
    ):
        (sf / stray).write_text("not a data file")
    (sf / "subdir").mkdir()
    (sf / "subdir" / "x.parquet").write_text("nested")
    (Path(base) / "not_a_partition").mkdir()
    (Path(base) / "not_a_partition" / "y.parquet").write_text("no partition metadata here")

    assert our_slices(base) == before
    assert view(base).partitions == ("la", "nyc", "sf")


def test_partition_metadata_in_base_file_format_marks_a_partition(tmp_path: Path) -> None:
    # hoodie.partition.metafile.use.base.format=true makes Hudi write the partition metadata
    # as `.hoodie_partition_metadata.parquet`
    base = str(tmp_path / "t")
    writer = new_table(base, COPY_ON_WRITE, partitioned=True)
    write(writer, "insert", range(30), 1)
    before = our_slices(base)
    for partition in ("la", "nyc", "sf"):
        folder = Path(base) / partition
        (folder / PARTITION_METADATA).unlink()
        pq.write_table(pa.table({"commitTime": ["x"]}), folder / f"{PARTITION_METADATA}.parquet")
    assert view(base).partitions == ("la", "nyc", "sf")
    assert assert_same_slices_as_oracle(base) == before


def compact_by_hand(base: str, ts: str) -> None:
    """Execute a pending compaction plan with the oracle's merge: base file at `ts` per group."""
    storage = HudiTable.open(base).storage
    oracle_slices = {s.file_id: s for s in OracleTable(base).get_file_slices()}
    metadata = CommitMetadata(
        compacted=True, operation_type="COMPACT", extra_metadata=schema_of(base)
    )
    timeline = HudiTable.open(base).timeline()
    for op in timeline.compaction_plan(timeline.pending_compactions()[0])["operations"]:
        merged = pa.Table.from_batches(
            [HudiFileGroupReader(base).read_file_slice(oracle_slices[op["fileId"]])]
        )
        name = str(BaseFileName(op["fileId"], "0-9-0", ts))
        merged = merged.set_column(4, FILE_NAME, pa.array([name] * merged.num_rows))
        write_base_file(storage, name, merged)
        metadata.add_write_stat(
            "", WriteStat(file_id=op["fileId"], path=name, prev_commit=op["baseInstantTime"])
        )
    put(base, f"{ts}.compaction.inflight")
    put(base, f"{ts}.commit", metadata.to_json())


def test_pending_compaction_starts_a_new_slice_that_writes_go_to(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, MERGE_ON_READ)
    write(writer, "insert", range(30), 1)
    write(writer, "upsert", range(0, 30, 2), 2)
    before = view(base).latest_file_slices()
    assert len(before) == 1 and before[0].log_files
    old = before[0]
    compacted_rows = oracle.rows_by_key(base)
    compaction = request_compaction(base, compaction_plan(base))

    # Planned, the group gets an empty slice at the compaction instant; reads merge the old one.
    got = view(base)
    latest = got.latest_file_slices()[0]
    assert (latest.base_instant_time, latest.base_file, latest.log_files) == (compaction, None, ())
    merged = got.latest_merged_file_slices()[0]
    assert (merged.base_instant_time, merged.base_file, merged.log_files) == (
        old.base_instant_time,
        old.base_file,
        old.log_files,
    )

    # An update while the compaction is pending is appended to the compaction's slice …
    write(writer, "upsert", [3, 5], 7)
    got = view(base)
    latest = got.latest_file_slices()[0]
    assert latest.base_instant_time == compaction and latest.base_file is None
    assert [log.name.base_instant_time for log in latest.log_files] == [compaction]
    merged = got.latest_merged_file_slices()[0]
    assert merged.base_file == old.base_file
    assert merged.log_files == old.log_files + latest.log_files

    # … so it survives the compaction, which only merges the slice it planned.
    compact_by_hand(base, compaction)
    after = oracle.rows_by_key(base)
    assert {k: v["ts"] for k, v in after.items()} == {
        k: 7 if k in ("k0003", "k0005") else v["ts"] for k, v in compacted_rows.items()
    }
    assert_same_slices_as_oracle(base)


def test_log_file_named_after_a_pending_compaction_lands_in_its_slice(tmp_path: Path) -> None:
    base = str(tmp_path / "t")
    writer = new_table(base, MERGE_ON_READ, partitioned=True)
    write(writer, "insert", range(60), 1)
    write(writer, "upsert", range(0, 60, 3), 2)
    plan = compaction_plan(base)
    planned = {(op["partitionPath"], op["fileId"]) for op in plan["operations"]}
    compaction = request_compaction(base, plan)
    put(base, f"{compaction}.compaction.inflight")

    target = view(base).latest_merged_file_slices("sf")[0]
    assert target.base_file is not None and target.log_files
    log_name = LogFileName(target.file_id, compaction, 1, "0-5-0")
    shutil.copy(Path(base) / target.log_files[0].path, Path(base) / "sf" / str(log_name))

    got = view(base)
    group = next(g for g in got.groups_in("sf") if g.file_id == target.file_id)
    assert [s.base_instant_time for s in group.slices][-2:] == [
        target.base_instant_time,
        compaction,
    ]
    assert [log.file_name for log in group.latest_slice.log_files] == [str(log_name)]
    merged = next(s for s in got.latest_merged_file_slices("sf") if s.file_id == target.file_id)
    assert merged.base_file == target.base_file
    assert [log.file_name for log in merged.log_files] == [
        *[log.file_name for log in target.log_files],
        str(log_name),
    ]
    assert got.pending_compaction_file_ids() == planned
    # every planned group is in its compaction slice; the others are untouched
    for s in got.latest_file_slices():
        expected = compaction if (s.partition_path, s.file_id) in planned else s.base_instant_time
        assert s.base_instant_time == expected
