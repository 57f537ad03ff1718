"""The writer on tables with a metadata table: created as Hudi 1.x initialises one, kept in step
by every commit; hudi-rs planning from it reads what hudi-rs listing storage reads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests import oracle
from tests.hudi.test_fixture_views import rows_of, without_metadata_table
from tests.hudi.test_metadata_reader import committed_files_on_storage, file_id_of, live_rows
from tests.hudi.test_writer import batch

from tms.hudi.errors import UnsupportedTableError
from tms.hudi.metadata.column_stats import column_stats_entries
from tms.hudi.metadata.listing import metadata_file_system_view
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.properties import COPY_ON_WRITE, MERGE_ON_READ, TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

SCHEMA = batch([0], 0).schema


def new_table(root: Path, table_type: str, version: int, partitions: tuple[str, ...]) -> HudiWriter:
    table = create_table(
        str(root),
        "trips",
        table_type=table_type,
        record_key_fields=["id"],
        ordering_field="ts",
        partition_fields=["city"],
        schema=SCHEMA,
        table_version=version,
        metadata_partitions=partitions,
    )
    return HudiWriter(table, max_file_rows=40)


def write_history(writer: HudiWriter) -> None:
    writer.insert(batch(range(0, 60), 1))
    writer.upsert(batch(range(40, 90), 2))
    writer.delete(batch([3, 44, 70], 3).select(["id", "ts", "city"]))
    writer.upsert(batch(range(85, 100), 4))


def listing_copy(root: Path, into: Path) -> Path:
    shutil.copytree(root, into)
    return without_metadata_table(into)


def assert_metadata_table_true(root: Path, tmp_path: Path) -> None:
    """hudi-rs planning from `files` reads what it reads by listing; our `files` are the
    committed files; the record index places every live key in its file group."""
    listed = listing_copy(root, tmp_path / f"listed-{len(list(tmp_path.iterdir()))}")
    assert oracle.rows_by_key(str(root)) == oracle.rows_by_key(str(listed))
    assert oracle.file_slices(str(root)) == oracle.file_slices(str(listed))
    reader = MetadataTableReader.open(Storage(str(root)))
    assert reader.all_files() == committed_files_on_storage(root)
    hudi = HudiTable.open(str(root))
    assert rows_of(metadata_file_system_view(reader).latest_file_slices()) == rows_of(
        hudi.file_system_view().latest_file_slices()
    )
    rows = live_rows(root, "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")
    expected = {
        r["_hoodie_record_key"]: (r["_hoodie_partition_path"], file_id_of(r["_hoodie_file_name"]))
        for r in rows
    }
    if "record_index" in reader.partitions:
        located = reader.record_locations([*expected, "k0003", "k0044", "k0070"])
        assert {k: (v.partition_path, v.file_id) for k, v in located.items()} == expected


@pytest.mark.parametrize("version", [8, 9])
def test_a_new_table_has_the_metadata_table_hudi_initialises(tmp_path: Path, version: int) -> None:
    root = tmp_path / "t"
    new_table(root, COPY_ON_WRITE, version, ("files", "column_stats", "record_index"))
    config = TableConfig.load(Storage(str(root)))
    assert config.metadata_partitions == ["column_stats", "files", "record_index"]
    timeline = root / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    completed = sorted(p.name.split("_")[0] for p in timeline.glob("*_*.deltacommit"))
    assert completed == ["00000000000000000", "00000000000000001", "00000000000000002"]
    logs = {p.parent.name: 0 for p in (root / ".hoodie" / "metadata").glob("*/.*.log.1_0-0-0")}
    groups = {
        name: len(list((root / ".hoodie" / "metadata" / name).glob(".*.log.1_0-0-0")))
        for name in logs
    }
    assert groups == {"files": 1, "column_stats": 2, "record_index": 10}
    reader = MetadataTableReader.open(Storage(str(root)))
    assert reader.partition_list() == []
    assert list(reader.index_definitions) == ["record_index", "column_stats"]


@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize(
    ("table_type", "partitions"),
    [
        (COPY_ON_WRITE, ("files", "column_stats", "record_index")),
        (MERGE_ON_READ, ("files", "record_index")),
    ],
)
def test_every_commit_keeps_the_metadata_table_true(
    tmp_path: Path, version: int, table_type: str, partitions: tuple[str, ...]
) -> None:
    root = tmp_path / "t"
    writer = new_table(root, table_type, version, partitions)
    write_history(writer)
    metadata_timeline = root / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    data_instants = {i.requested_time for i in HudiTable.open(str(root)).timeline().completed()}
    md_instants = {p.name.split("_")[0] for p in metadata_timeline.glob("*_*.deltacommit")}
    assert data_instants <= md_instants
    assert_metadata_table_true(root, tmp_path)
    if "column_stats" in partitions:
        reader = MetadataTableReader.open(Storage(str(root)))
        definition = reader.index_definitions["column_stats"]
        for piece in HudiTable.open(str(root)).file_system_view().latest_file_slices():
            assert piece.base_file is not None
            footer = pq.ParquetFile(root / piece.base_file.path).metadata
            for key, payload in column_stats_entries(
                piece.partition_path,
                piece.base_file.file_name,
                footer,
                list(definition.source_fields),
                definition.version,
            ):
                stored = reader.lookup("column_stats", [key])[key]
                assert stored.fields["ColumnStatsMetadata"] == payload


def test_column_stats_on_merge_on_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="log files"):
        new_table(tmp_path / "t", MERGE_ON_READ, 9, ("files", "column_stats"))


def test_a_metadata_partition_the_writer_cannot_keep_is_refused_before_writing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "t"
    writer = new_table(root, COPY_ON_WRITE, 9, ("files",))
    writer.insert(batch(range(0, 5), 1))
    props = root / ".hoodie" / "hoodie.properties"
    props.write_text(
        props.read_text().replace(
            "hoodie.table.metadata.partitions=files",
            "hoodie.table.metadata.partitions=files,partition_stats",
        )
    )
    before = sorted(p.name for p in root.rglob("*"))
    with pytest.raises(UnsupportedTableError, match="partition_stats"):
        HudiWriter(HudiTable.open(str(root))).upsert(batch(range(0, 5), 2))
    assert sorted(p.name for p in root.rglob("*")) == before


def test_rows_written_are_the_rows_read(tmp_path: Path) -> None:
    root = tmp_path / "t"
    writer = new_table(root, MERGE_ON_READ, 9, ("files", "record_index"))
    writer.insert(batch(range(0, 10), 1))
    writer.upsert(batch(range(5, 12), 2))
    got = oracle.rows_by_key(str(root))
    assert sorted(got) == [f"k{i:04d}" for i in range(12)]
    assert {k: v["ts"] for k, v in got.items()} == {
        f"k{i:04d}": (1 if i < 5 else 2) for i in range(12)
    }
    assert pa.array(list(got)).type == pa.string()
