"""Paths from a table's own files resolve inside the table or are refused, naming the path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tms.hudi.errors import TableRefusedError, UnsafePathError
from tms.hudi.files.fs_view import FileSystemView
from tms.hudi.files.markers import Marker, MarkerType, create_marker, list_markers
from tms.hudi.storage import Storage
from tms.hudi.table_paths import TablePaths
from tms.testing.sample_writer.new_table import create_table

SOURCE = "clean plan 20250101000000000"
FILE = "f1-0_0-1-0_20250101000000000.parquet"


@pytest.fixture
def base(tmp_path: Path) -> Path:
    root = tmp_path / "trips"
    (root / "sf").mkdir(parents=True)
    (root / ".hoodie").mkdir()
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "secret.txt").write_text("secret")
    return root


def paths_of(base: Path | str) -> TablePaths:
    return TablePaths(Storage(str(base)), SOURCE)


def refused(call: Callable[..., object], *args: object) -> UnsafePathError:
    with pytest.raises(UnsafePathError) as caught:
        call(*args)
    return caught.value


@pytest.mark.parametrize("partition", ["", "sf", "2024/01/01", "city=sf", "dt=2024-01-01 10:00"])
def test_partitions_inside_the_table_are_kept_as_they_are(base: Path, partition: str) -> None:
    assert paths_of(base).partition(partition) == partition


@pytest.mark.parametrize(
    ("partition", "reason"),
    [
        ("../victim", "'..'"),
        ("sf/../../victim", "'..'"),
        ("/abs", "absolute"),
        ("sf//x", "empty or '.'"),
        ("./sf", "empty or '.'"),
        ("sf/", "empty or '.'"),
        ("..\\victim", "backslash"),
        ("sf\x00/../x", "control character"),
        ("s3://other-bucket/x", "another file system"),
        ("file:/etc", "another file system"),
        (".hoodie", ".hoodie/"),
        (".hoodie/.temp", ".hoodie/"),
    ],
)
def test_partitions_leaving_the_table_are_refused(base: Path, partition: str, reason: str) -> None:
    error = refused(paths_of(base).partition, partition)
    assert isinstance(error, TableRefusedError)
    assert error.path == partition and reason in error.reason
    assert str(error).startswith(SOURCE) and repr(partition) in str(error)


def test_data_files_resolve_to_paths_relative_to_the_base_path(base: Path) -> None:
    paths = paths_of(base)
    expected = f"sf/{FILE}"
    for value in (
        FILE,
        f"sf/{FILE}",
        f"{base}/sf/{FILE}",
        f"file:{base}/sf/{FILE}",
        f"file://{base}/sf/{FILE}",
        f"file://localhost{base}/sf/{FILE}",
        f"local://{base}/sf/{FILE}",
    ):
        assert paths.data_file("sf", value) == expected, value
    assert paths.data_file("", FILE) == FILE
    assert paths.data_file("", f"file:{base}/{FILE}") == FILE


def test_a_table_opened_by_a_relative_path_reads_its_own_plans(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(base.parent)
    paths = paths_of("trips")
    assert paths.data_file("sf", f"trips/sf/{FILE}") == f"sf/{FILE}"
    assert paths.data_file("sf", f"{base}/sf/{FILE}") == f"sf/{FILE}"
    refused(paths.data_file, "sf", "trips/../victim/secret.txt")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("{tmp}/victim/secret.txt", "outside the table"),
        ("file:{tmp}/victim/secret.txt", "outside the table"),
        ("file:/etc/passwd", "outside the table"),
        ("{base}/../victim/secret.txt", "'..'"),
        ("file://evil-host{base}/sf/" + FILE, "another file system"),
        ("s3://other-bucket/trips/sf/" + FILE, "another file system"),
        ("hdfs://namenode{base}/sf/" + FILE, "another file system"),
        ("{base}/nyc/" + FILE, "not in its partition"),
        ("{base}/sf/sub/" + FILE, "not in its partition"),
        ("../victim/secret.txt", "'..'"),
        ("nyc/" + FILE, "not in its partition"),
        ("{base}/.hoodie/hoodie.properties", ".hoodie/"),
        ("C:\\victim\\secret.txt", "backslash"),
        ("..", "'..'"),
    ],
)
def test_data_files_outside_their_partition_are_refused(
    base: Path, value: str, reason: str
) -> None:
    shown = value.format(tmp=base.parent, base=base)
    error = refused(paths_of(base).data_file, "sf", shown)
    assert error.path == shown and reason in error.reason
    assert repr(shown) in str(error)


def test_a_data_file_of_a_bad_partition_is_refused_for_the_partition(base: Path) -> None:
    error = refused(paths_of(base).data_file, "../victim", "secret.txt")
    assert error.path == "../victim"
    error = refused(paths_of(base).data_file, ".hoodie", "hoodie.properties")
    assert error.path == ".hoodie"


def test_relative_paths_stay_out_of_hoodie_for_data_only(base: Path) -> None:
    paths = paths_of(base)
    assert paths.relative(f"sf/{FILE}") == f"sf/{FILE}"
    assert paths.relative(".hoodie/.temp/x", data=False) == ".hoodie/.temp/x"
    assert ".hoodie/" in refused(paths.relative, ".hoodie/hoodie.properties").reason
    assert "'..'" in refused(paths.relative, "sf/../../victim/secret.txt").reason


@pytest.mark.parametrize("file_id", ["../../victim/evil", "a/b", "..", ".", "", "x\\y", "x\ny"])
def test_file_ids_are_single_names(base: Path, file_id: str) -> None:
    assert refused(paths_of(base).name, file_id, "file id").path == file_id
    assert paths_of(base).name("f1-0", "file id") == "f1-0"


def test_symlinks_out_of_the_table_are_refused(base: Path) -> None:
    victim = base.parent / "victim"
    (base / "link").symlink_to(victim, target_is_directory=True)
    (base / "sf" / "escape.parquet").symlink_to(victim / "secret.txt")
    (base / "meta").symlink_to(base / ".hoodie", target_is_directory=True)
    (base / "inner").symlink_to(base / "sf", target_is_directory=True)
    paths = paths_of(base)

    error = refused(paths.partition, "link")
    assert "out of the table through a symlink" in error.reason and str(victim) in error.reason
    refused(paths.data_file, "link", "secret.txt")
    refused(paths.data_file, "sf", "escape.parquet")
    assert "into .hoodie/" in refused(paths.partition, "meta").reason
    refused(paths.relative, "meta/hoodie.properties")
    # a symlink that stays inside the table, and files not written yet, are fine
    assert paths.data_file("inner", FILE) == f"inner/{FILE}"
    assert paths.partition("new/partition") == "new/partition"


def test_a_table_reached_through_a_symlink_is_its_own_root(base: Path) -> None:
    alias = base.parent / "alias"
    alias.symlink_to(base, target_is_directory=True)
    paths = paths_of(alias)
    assert paths.data_file("sf", f"{alias}/sf/{FILE}") == f"sf/{FILE}"
    assert paths.partition("sf") == "sf"


def test_object_store_locations_must_be_on_the_tables_bucket_and_scheme() -> None:
    paths = TablePaths(Storage("memory://bucket/warehouse/trips"), SOURCE)
    location = f"memory://bucket/warehouse/trips/sf/{FILE}"
    assert paths.data_file("sf", location) == f"sf/{FILE}"
    assert paths.data_file("sf", FILE) == f"sf/{FILE}"
    for value, reason in (
        (f"memory://other-bucket/warehouse/trips/sf/{FILE}", "another file system"),
        (f"s3://bucket/warehouse/trips/sf/{FILE}", "another file system"),
        (f"/warehouse/trips/sf/{FILE}", "another file system"),
        (f"file:/warehouse/trips/sf/{FILE}", "another file system"),
        (f"memory://bucket/warehouse/other/sf/{FILE}", "outside the table"),
    ):
        assert reason in refused(paths.data_file, "sf", value).reason, value


def test_markers_standing_for_files_outside_the_table_are_refused(base: Path) -> None:
    storage = Storage(str(base))
    instant = "20250101000000000"
    create_marker(storage, instant, Marker("sf", FILE, MarkerType.CREATE))
    assert [m.data_file_path for m in list_markers(storage, instant)] == [f"sf/{FILE}"]

    create_marker(storage, instant, Marker(".hoodie", "hoodie.properties", MarkerType.CREATE))
    error = refused(list_markers, storage, instant)
    assert error.path == ".hoodie/hoodie.properties"
    assert str(error).startswith(f"markers of instant {instant}")


def test_markers_through_a_symlinked_partition_are_refused(base: Path) -> None:
    storage = Storage(str(base))
    (base / "link").symlink_to(base.parent / "victim", target_is_directory=True)
    create_marker(storage, "20250101000000000", Marker("link", "secret.txt", MarkerType.MERGE))
    assert refused(list_markers, storage, "20250101000000000").path == "link/secret.txt"


def test_the_file_listing_does_not_follow_a_partition_symlinked_out(tmp_path: Path) -> None:
    """Plans are made from the listing, so none names a file behind such a symlink."""
    table = create_table(
        str(tmp_path / "trips"), "trips", record_key_fields=["id"], ordering_field="ts"
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / ".hoodie_partition_metadata").write_text("commitTime=1\n")
    Path(table.base_path, "link").symlink_to(outside, target_is_directory=True)
    Path(table.base_path, "sf").mkdir()
    Path(table.base_path, "sf", ".hoodie_partition_metadata").write_text("commitTime=1\n")
    assert FileSystemView.build(table.storage, table.timeline()).partitions == ("sf",)


@pytest.mark.parametrize("value", ["../../outside", "/tmp/outside", "timeline/../../x"])
def test_a_timeline_path_leaving_hoodie_refuses_the_table(tmp_path: Path, value: str) -> None:
    """Instants are read and written under `.hoodie/<hoodie.timeline.path>`."""
    with pytest.raises(UnsafePathError, match=r"hoodie.properties: .*hoodie.timeline.path"):
        create_table(
            str(tmp_path / "trips"),
            "trips",
            record_key_fields=["id"],
            ordering_field="ts",
            extra_properties={"hoodie.timeline.path": value},
        )
    assert not (tmp_path / "outside").exists()


def test_a_timeline_path_inside_hoodie_is_read(tmp_path: Path) -> None:
    table = create_table(
        str(tmp_path / "trips"),
        "trips",
        record_key_fields=["id"],
        ordering_field="ts",
        extra_properties={"hoodie.timeline.path": "timeline"},
    )
    assert table.timeline().instants == ()
