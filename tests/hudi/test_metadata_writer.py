"""Writing a delta commit into the metadata table of a real Hudi 1.1 table, and rolling it back:
our reader and hudi-rs (which plans from the `files` partition) both see the change, and after
the rollback both see the table as it was."""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests import oracle
from tests.hudi.test_fixture_views import WITH_METADATA_TABLE, rows_of, unzip_fixture
from tests.hudi.test_metadata_reader import committed_files_on_storage

from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.avro.write_stat import WriteStat
from tms.hudi.errors import UnsupportedTableError
from tms.hudi.files.log_block import BlockType
from tms.hudi.files.log_reader import read_log_blocks
from tms.hudi.metadata.listing import metadata_file_system_view
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.records import RecordType
from tms.hudi.metadata.rollback import rollback_delta_commit
from tms.hudi.metadata.updates import MetadataUpdate
from tms.hudi.metadata.writer import write_delta_commit
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import new_instant_time, request, transition

NEW_PARTITION = "region=latam"


@pytest.fixture(params=WITH_METADATA_TABLE)
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return unzip_fixture(request.param, tmp_path)


def reader_of(root: Path) -> MetadataTableReader:
    return MetadataTableReader.open(Storage(str(root)))


def next_instant(root: Path) -> str:
    """A time after every instant of the data table and of its metadata table."""
    data = HudiTable.open(str(root)).timeline()
    return new_instant_time(data.instants + reader_of(root).timeline.instants)


Files = dict[str, dict[str, int]]


def synthetic_files(
    root: Path, instant: str, remove: bool = True
) -> tuple[Files, dict[str, list[str]]]:
    """New base files (copies of a live one) in `region=us` and in a new partition, and the
    oldest base file of `region=us` removed (from storage too with `remove`), as a commit and
    a clean would leave them."""
    us = root / "region=us"
    parquet = sorted(us.glob("*.parquet"), key=lambda p: p.name.rsplit("_", 1)[-1])
    oldest, newest = parquet[0], parquet[-1]
    latam = root / NEW_PARTITION
    latam.mkdir()
    shutil.copy(us / ".hoodie_partition_metadata", latam / ".hoodie_partition_metadata")
    added: dict[str, dict[str, int]] = {}
    for folder in (us, latam):
        name = f"{uuid.uuid4()}-0_0-1-1_{instant}.parquet"
        shutil.copy(newest, folder / name)
        added[folder.name] = {name: (folder / name).stat().st_size}
    if remove:
        oldest.unlink()
    return added, {"region=us": [oldest.name]}


def commit_data_instant(root: Path, instant: str, added: Files, done: bool) -> None:
    storage = Storage(str(root))
    config = TableConfig.load(storage)
    metadata = CommitMetadata(operation_type="INSERT")
    for partition, files in added.items():
        for name, size in files.items():
            stat = WriteStat(
                file_id=name.split("_", 1)[0],
                path=f"{partition}/{name}",
                prev_commit="null",
                num_writes=1,
                num_inserts=1,
                total_write_bytes=size,
                partition_path=partition,
                file_size_in_bytes=size,
            )
            metadata.add_write_stat(partition, stat)
    pending = request(storage, config, instant, Action.COMMIT)
    pending = transition(storage, config, pending, State.INFLIGHT)
    if done:
        transition(storage, config, pending, State.COMPLETED, metadata)


def views(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Latest slices planned from our reading of the metadata table, and hudi-rs's."""
    ours = rows_of(metadata_file_system_view(reader_of(root)).latest_file_slices())
    return ours, oracle.file_slices(str(root))


def test_a_delta_commit_is_seen_by_our_reader_and_by_hudi_rs(table: Path) -> None:
    instant = next_instant(table)
    added, deleted = synthetic_files(table, instant)
    result = write_delta_commit(Storage(str(table)), instant, MetadataUpdate.files(added, deleted))
    commit_data_instant(table, instant, added, done=True)

    reader = reader_of(table)
    assert NEW_PARTITION in reader.partition_list()
    assert reader.all_files() == committed_files_on_storage(table)
    ours, theirs = views(table)
    assert ours == theirs
    new_ids = {name.split("_", 1)[0] for files in added.values() for name in files}
    assert new_ids <= {s["file_id"] for s in theirs}
    listing = rows_of(HudiTable.open(str(table)).file_system_view().latest_file_slices())
    assert ours == listing

    assert len(result.log_files) == 1 and result.completion_time
    (log,) = result.log_files
    assert log.startswith(f"files/.files-0000-0_{instant}.log.1_")
    blocks = read_log_blocks((table / ".hoodie" / "metadata" / log).read_bytes())
    assert [b.block_type for b in blocks] == [BlockType.HFILE_DATA]
    mdt = reader.timeline
    done = mdt.get(instant)
    assert done is not None and done.is_completed and done.action is Action.DELTA_COMMIT
    stats = mdt.commit_metadata(done)
    assert stats.operation_type == "UPSERT_PREPPED"
    assert [s.path for s in stats.write_stats()] == [log]
    assert not (table / ".hoodie" / "metadata" / ".hoodie" / ".temp" / instant).exists()


def test_rollback_after_a_crashed_data_commit_restores_what_both_read(table: Path) -> None:
    """The metadata delta commit completed, the data commit did not: readers already ignore
    the delta commit; after its rollback it is gone, and both readers see the table as before."""
    before_files = reader_of(table).all_files()
    before_views = views(table)
    instant = next_instant(table)
    added, deleted = synthetic_files(table, instant, remove=False)
    write_delta_commit(Storage(str(table)), instant, MetadataUpdate.files(added, deleted))
    commit_data_instant(table, instant, added, done=False)
    assert reader_of(table).all_files() == before_files

    result = rollback_delta_commit(Storage(str(table)), instant)
    assert result.rolled_back == instant and len(result.deleted_files) == 1

    reader = reader_of(table)
    assert reader.timeline.get(instant) is None
    rollback = reader.timeline.get(result.rollback_instant)
    assert rollback is not None and rollback.is_completed and rollback.action is Action.ROLLBACK
    assert reader.all_files() == before_files
    assert views(table) == before_views


def test_rollback_of_an_inflight_delta_commit_deletes_its_log_files(table: Path) -> None:
    """A crash after the log files were written but before the delta commit completed."""
    before = reader_of(table).all_files()
    instant = next_instant(table)
    added, _ = synthetic_files(table, instant)
    written = write_delta_commit(Storage(str(table)), instant, MetadataUpdate.files(added))
    timeline = table / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    (timeline / f"{instant}_{written.completion_time}.deltacommit").unlink()
    assert reader_of(table).timeline.get(instant).state is State.INFLIGHT  # type: ignore[union-attr]

    rollback_delta_commit(Storage(str(table)), instant)
    assert not any((table / ".hoodie" / "metadata").rglob(f"*_{instant}.log.*"))
    assert not any(p.name.startswith(instant) for p in timeline.iterdir())
    assert reader_of(table).all_files() == before


def test_refusals_write_nothing(table: Path) -> None:
    storage = Storage(str(table))
    instant = next_instant(table)
    metadata_root = table / ".hoodie" / "metadata"
    before = sorted(p.relative_to(metadata_root) for p in metadata_root.rglob("*"))
    not_built = MetadataUpdate(records={"bloom_filters": []})
    with pytest.raises(UnsupportedTableError, match="bloom_filters is not built"):
        write_delta_commit(storage, instant, not_built)
    existing = reader_of(table).timeline.commits()[-1].requested_time
    with pytest.raises(UnsupportedTableError, match="already has instant"):
        write_delta_commit(storage, existing, MetadataUpdate.files({"region=us": {}}))
    with pytest.raises(UnsupportedTableError, match="no delta commit"):
        rollback_delta_commit(storage, instant)
    data_commit = HudiTable.open(str(table)).timeline().commits()[-1].requested_time
    if reader_of(table).timeline.get(data_commit) is not None:
        with pytest.raises(UnsupportedTableError, match="data table committed"):
            rollback_delta_commit(storage, data_commit)
    properties = table / ".hoodie" / "hoodie.properties"
    inflight = re.sub(
        r"(?m)^hoodie\.table\.metadata\.partitions\.inflight=.*$",
        "hoodie.table.metadata.partitions.inflight=bloom_filters",
        properties.read_text(),
    )
    properties.write_text(inflight)
    building = MetadataUpdate(records={"bloom_filters": []})
    with pytest.raises(UnsupportedTableError, match="being built and has no file groups"):
        write_delta_commit(storage, instant, building)
    properties.write_text(
        re.sub(r"(?m)^hoodie\.table\.version=9$", "hoodie.table.version=6", inflight)
    )
    with pytest.raises(UnsupportedTableError, match="table version 6"):
        write_delta_commit(storage, instant, MetadataUpdate.files({"region=us": {"x.parquet": 1}}))
    assert sorted(p.relative_to(metadata_root) for p in metadata_root.rglob("*")) == before


def test_the_files_records_a_commit_writes() -> None:
    update = MetadataUpdate.files(
        {"a": {"f1.parquet": 10}}, {"a": ["f0.parquet"], "b": ["g.parquet"]}
    )
    (records,) = update.records.values()
    assert [r.type for r in records] == [
        RecordType.ALL_PARTITIONS,
        RecordType.FILES,
        RecordType.FILES,
    ]
    assert records[0].live_files() == {"a": 0}
    assert records[1].key == "a" and records[1].live_files() == {"f1.parquet": 10}
    assert records[1].files()["f0.parquet"].is_deleted
    assert records[2].key == "b" and records[2].live_files() == {}
