"""Table version 6 (Hudi 0.14/0.15) with a metadata table: a timeline of layout 1 on the
metadata table, log files named by their slice's base instant with one new version per delta
commit, the metadata table's compaction at `<latest delta commit>001`, and rollbacks that
touch only what the rolled-back delta commit wrote."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.hudi.test_writer import batch
from tests.hudi.test_writer_metadata_table import (
    assert_metadata_table_true,
    new_table,
    write_history,
)

from tms.hudi.files.log_block import BlockType, HeaderKey
from tms.hudi.files.names import LogFileName
from tms.hudi.hfile import HFileReader
from tms.hudi.metadata.compaction import execute_metadata_compaction, schedule_metadata_compaction
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.rollback import rollback_delta_commit
from tms.hudi.metadata.schema import METADATA_RECORD_0X, METADATA_RECORD_1X, decode_record
from tms.hudi.metadata.slice_reader import SCHEMA_INFO_KEY, slice_blocks
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.transitions import request
from tms.testing.sample_writer.writer import HudiWriter

METADATA = Path(".hoodie") / "metadata"


def reader_of(root: Path) -> MetadataTableReader:
    return MetadataTableReader.open(Storage(str(root)))


def metadata_records(root: Path) -> dict[str, dict[str, object]]:
    reader = reader_of(root)
    return {
        partition: {key: record.fields for key, record in reader.read_partition(partition).items()}
        for partition in reader.partitions
    }


def log_names(root: Path, partition: str) -> list[LogFileName]:
    found = (LogFileName.parse(p.name) for p in (root / METADATA / partition).iterdir())
    return sorted((n for n in found if n is not None), key=lambda n: (n.file_id, n.sort_key))


@pytest.fixture
def mor(tmp_path: Path) -> Path:
    root = tmp_path / "t"
    write_history(new_table(root, MERGE_ON_READ, 6, ("files", "record_index")))
    return root


def test_a_new_table_has_the_metadata_table_hudi_0x_initialises(tmp_path: Path) -> None:
    root = tmp_path / "t"
    new_table(root, COPY_ON_WRITE, 6, ("files", "column_stats", "record_index"))
    config = TableConfig.load(Storage(str(root / METADATA)))
    assert (config.table_version, config.timeline_layout_version) == (6, 1)
    timeline = root / METADATA / ".hoodie"
    completed = sorted(p.stem for p in timeline.glob("*.deltacommit"))
    assert completed == ["00000000000000010", "00000000000000011", "00000000000000012"]
    assert not (timeline / "timeline").exists()
    assert (timeline / "archived").is_dir()
    # version 6 tables have no index definitions
    assert not (root / ".hoodie" / ".index_defs").exists()
    assert reader_of(root).partition_list() == []
    # the files carry the record schema version 6 readers know, not Hudi 1.x's
    base = next((root / METADATA / "files").glob("*.hfile"))
    schema = HFileReader(base.read_bytes()).file_info[SCHEMA_INFO_KEY].decode()
    assert schema == METADATA_RECORD_0X != METADATA_RECORD_1X
    assert "SecondaryIndexMetadata" not in schema and "LocalDateWrapper" not in schema


@pytest.mark.parametrize(
    ("table_type", "partitions"),
    [
        (COPY_ON_WRITE, ("files", "column_stats", "record_index")),
        (MERGE_ON_READ, ("files", "record_index")),
    ],
)
def test_every_commit_keeps_the_metadata_table_true(
    tmp_path: Path, table_type: str, partitions: tuple[str, ...]
) -> None:
    root = tmp_path / "t"
    write_history(new_table(root, table_type, 6, partitions))
    data = {i.requested_time for i in HudiTable.open(str(root)).timeline().completed()}
    metadata = {p.stem for p in (root / METADATA / ".hoodie").glob("*.deltacommit")}
    assert data <= metadata
    assert_metadata_table_true(root, tmp_path)
    # every log file is named by its slice's base instant (the bootstrap delta commit), and
    # each delta commit took the next version of its file group
    for partition in partitions:
        names = log_names(root, partition)
        bases = {n.base_instant_time for n in names}
        assert len(bases) == 1 and next(iter(bases)).startswith("00000000000000")
        for file_id in {n.file_id for n in names}:
            versions = [n.version for n in names if n.file_id == file_id]
            assert versions == list(range(1, len(versions) + 1))


def test_the_metadata_compaction_is_named_after_the_latest_delta_commit(mor: Path) -> None:
    before = metadata_records(mor)
    latest = reader_of(mor).timeline.completed((Action.DELTA_COMMIT,))[-1].requested_time

    instant = schedule_metadata_compaction(Storage(str(mor)))
    assert instant == f"{latest}001"
    execute_metadata_compaction(Storage(str(mor)), instant)

    reader = reader_of(mor)
    compacted = reader.timeline.get(instant)
    assert compacted is not None and compacted.is_completed
    assert (mor / METADATA / ".hoodie" / f"{instant}.commit").is_file()
    for partition in reader.partitions:
        for file_slice in reader.file_slices(partition):
            assert file_slice.base_file is not None
            assert file_slice.base_instant_time == instant and not file_slice.log_files
    assert metadata_records(mor) == before
    assert_metadata_table_true(mor, mor.parent)

    # later commits write log files named by the compaction, starting again at version 1
    writer = HudiWriter(HudiTable.open(str(mor)), max_file_rows=40)
    writer.upsert(batch(range(95, 110), 5))
    after = [n for n in log_names(mor, "files") if n.base_instant_time == instant]
    assert [n.version for n in after] == [1]
    assert_metadata_table_true(mor, mor.parent)
    assert schedule_metadata_compaction(Storage(str(mor))) is not None


def test_no_metadata_compaction_is_planned_while_a_writer_is_active(mor: Path) -> None:
    table = HudiTable.open(str(mor))
    pending = request(table.storage, table.config, "29990101000000000", Action.DELTA_COMMIT)
    assert schedule_metadata_compaction(Storage(str(mor))) is None
    assert reader_of(mor).timeline.pending_compactions() == []
    (mor / ".hoodie" / f"{pending.requested_time}.deltacommit.requested").unlink()
    assert schedule_metadata_compaction(Storage(str(mor))) is not None


def test_rolling_back_a_delta_commit_deletes_only_the_log_files_it_wrote(mor: Path) -> None:
    """A crash after the metadata delta commit, before the data instant completed: the log
    files share their base instant with every earlier delta commit's, and only the new
    versions go."""
    before_records = metadata_records(mor)
    before_logs = {n for p in ("files", "record_index") for n in log_names(mor, p)}
    table = HudiTable.open(str(mor))
    writer = HudiWriter(table, max_file_rows=40)
    instant = writer.upsert(batch(range(0, 10), 9))
    # undo the data table's completion: the data instant is now inflight
    (mor / ".hoodie" / f"{instant}.deltacommit").unlink()
    assert metadata_records(mor) == before_records  # readers ignore it already

    result = rollback_delta_commit(Storage(str(mor)), instant)

    after_logs = {n for p in ("files", "record_index") for n in log_names(mor, p)}
    assert after_logs == before_logs
    assert len(result.deleted_files) > 0
    reader = reader_of(mor)
    assert reader.timeline.get(instant) is None
    rollback = reader.timeline.get(result.rollback_instant)
    assert rollback is not None and rollback.state is State.COMPLETED
    assert metadata_records(mor) == before_records


def test_records_written_decode_under_the_version_6_schema(mor: Path) -> None:
    reader = reader_of(mor)
    blocks = [
        block
        for file_slice in reader.file_slices("record_index")
        for block in slice_blocks(reader.storage, file_slice)
        if block.block_type is BlockType.HFILE_DATA
    ]
    assert blocks
    for block in blocks:
        assert block.header[HeaderKey.SCHEMA] == METADATA_RECORD_0X
        for _, value in HFileReader(block.content).entries():
            location = decode_record(value, METADATA_RECORD_0X)["recordIndexMetadata"]
            assert "position" not in location and location["fileId"] is not None
