"""A marker deletes nothing its instant did not write: base files by the instant in their
name, log files by the instant of every block they hold, and, where the plan names file
groups, only files in them. Planted markers are counted and their files stay."""

from __future__ import annotations

from pathlib import Path

from tms.hudi.files import timeline_markers
from tms.hudi.files.log_writer import encode_empty_delete_block
from tms.hudi.files.marked_files import delete_unreported_files, sort_marked_files, written_by
from tms.hudi.files.markers import Marker, MarkerType, create_marker
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.storage import Storage

COMMITTED = "20260101110000000"
INSTANT = "20260101120000000"
PARTITION = "p=1"


def base(file_id: str, instant: str, token: str = "0-1-0") -> Marker:
    return Marker(PARTITION, str(BaseFileName(file_id, token, instant)), MarkerType.CREATE)


def log(file_id: str, base_instant: str, version: int) -> Marker:
    name = LogFileName(file_id, base_instant, version, "0-1-0")
    return Marker(PARTITION, str(name), MarkerType.APPEND)


def write(storage: Storage, marker: Marker, content: bytes = b"PAR1 data PAR1") -> None:
    storage.write_bytes(marker.data_file_path, content)


def test_a_base_file_is_the_instants_only_when_its_name_says_so(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    committed, own = base("fg-1", COMMITTED), base("fg-1", INSTANT, "0-2-1")
    write(storage, committed)
    write(storage, own)
    assert not written_by(storage, committed, INSTANT)
    assert written_by(storage, own, INSTANT)
    assert written_by(storage, own, INSTANT, {(PARTITION, "fg-1")})
    assert not written_by(storage, own, INSTANT, {(PARTITION, "fg-2")})
    assert not written_by(storage, own, INSTANT, {("p=2", "fg-1")})
    not_a_data_file = Marker(PARTITION, "notes.txt", MarkerType.CREATE)
    write(storage, not_a_data_file)
    assert not written_by(storage, not_a_data_file, INSTANT)


def test_a_log_file_is_the_instants_only_when_every_block_is(tmp_path: Path) -> None:
    """Layout 1 names a log file by its slice's base instant, so a committed log file of
    another writer can carry this instant's time in its name: its blocks tell."""
    storage = Storage(str(tmp_path))
    committed = log("fg-1", INSTANT, 1)  # named by the base instant, written by COMMITTED
    write(storage, committed, encode_empty_delete_block(COMMITTED))
    appended = log("fg-1", COMMITTED, 2)  # a committed block, then one of the instant
    write(
        storage, appended, encode_empty_delete_block(COMMITTED) + encode_empty_delete_block(INSTANT)
    )
    own = log("fg-1", COMMITTED, 3)
    write(storage, own, encode_empty_delete_block(INSTANT) + b"\x00torn")
    empty = log("fg-1", COMMITTED, 4)
    write(storage, empty, b"")
    missing = log("fg-1", COMMITTED, 5)
    assert not written_by(storage, committed, INSTANT)
    assert not written_by(storage, appended, INSTANT)
    assert written_by(storage, own, INSTANT)
    assert not written_by(storage, empty, INSTANT)
    assert not written_by(storage, missing, INSTANT)


def test_reconciliation_deletes_failed_attempts_files_and_counts_planted_markers(
    tmp_path: Path,
) -> None:
    storage = Storage(str(tmp_path))
    committed = [base(f"fg-{i}", COMMITTED) for i in range(3)]
    reported, failed_attempt = base("fg-0", INSTANT, "0-1-0"), base("fg-0", INSTANT, "0-1-7")
    outside_plan = base("fg-9", INSTANT, "0-1-7")
    for marker in [*committed, reported, failed_attempt, outside_plan]:
        write(storage, marker)
    for marker in [reported, failed_attempt, outside_plan]:
        create_marker(storage, INSTANT, marker)
    # markers a client sent to the timeline server, naming committed files
    timeline_markers.write_marker_file(storage, INSTANT, 0, [m.name for m in committed])

    planned = {(PARTITION, f"fg-{i}") for i in range(3)}
    foreign = delete_unreported_files(storage, INSTANT, {reported.data_file_path}, planned)

    assert foreign == 4  # three committed files, one file group the plan does not name
    assert all(storage.exists(m.data_file_path) for m in [*committed, reported, outside_plan])
    assert not storage.exists(failed_attempt.data_file_path)


def test_sorting_keeps_the_markers_of_both_sides(tmp_path: Path) -> None:
    storage = Storage(str(tmp_path))
    own, other = base("fg-1", INSTANT), base("fg-1", COMMITTED)
    marked = sort_marked_files(storage, INSTANT, [own, other])
    assert (marked.owned, marked.foreign) == ((own,), (other,))
    assert marked.owned_paths == [own.data_file_path]
