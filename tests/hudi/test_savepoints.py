"""Savepoints made, listed and removed on tables tms's sample writer wrote (versions 6 and 9):
the files they keep are the latest slices as of their instant, the instant files are Hudi's,
the refusals name why, and the cleaner keeps what a savepoint names."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.hudi.test_fixture_views import unzip_fixture
from tests.services.test_clean import cow_with_versions

from tms.hudi.errors import SavepointRefusedError
from tms.hudi.savepoints import create_savepoint, delete_savepoint, list_savepoints
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.hudi.timeline.timeline import WRITE_COMMIT_ACTIONS
from tms.services.clean.plan import KEEP_LATEST_FILE_VERSIONS, schedule_clean


@pytest.fixture(params=[6, 9], ids=["v6", "v9"])
def table_version(request: pytest.FixtureRequest) -> int:
    version: int = request.param
    return version


def savepointed_files(table: HudiTable, instant: str) -> dict[str, list[str]]:
    timeline = table.timeline()
    done = [i for i in timeline.completed((Action.SAVEPOINT,)) if i.requested_time == instant]
    metadata = timeline.avro_details(done[0], State.COMPLETED) or {}
    return {
        partition: sorted(entry["savepointDataFile"])
        for partition, entry in metadata["partitionMetadata"].items()
    }


def test_a_savepoint_keeps_the_latest_slices_as_of_its_instant(
    tmp_path: Path, table_version: int
) -> None:
    base = cow_with_versions(tmp_path, upserts=2, table_version=table_version)
    table = HudiTable.open(base)
    commits = [i.requested_time for i in table.timeline().completed(WRITE_COMMIT_ACTIONS)]
    first, latest = commits[0], commits[-1]
    view_then = HudiTable.open(base).file_system_view()  # as of the latest commit

    savepoint, made = create_savepoint(table, first, user="ops", comment="before the upserts")
    assert made and savepoint.instant_time == first
    assert (savepoint.savepointed_by, savepoint.comments) == ("ops", "before the upserts")
    # as of the first commit: the inserted base files only, one per file group
    files = savepointed_files(table, first)
    assert sum(map(len, files.values())) == savepoint.files == 6
    assert all(name.endswith(f"_{first}.parquet") for names in files.values() for name in names)

    again, made_again = create_savepoint(table, first, user="someone else")
    assert not made_again and again == savepoint  # a repeat changes nothing

    newest, _ = create_savepoint(table, latest, user="ops")
    expected = {p: [] for p in view_then.partitions}
    for piece in view_then.latest_file_slices():
        assert piece.base_file is not None
        expected[piece.partition_path].append(piece.base_file.file_name)
    assert savepointed_files(table, latest) == {p: sorted(n) for p, n in expected.items()}
    assert [s.instant_time for s in list_savepoints(table)] == [first, latest]
    assert (newest.completion_time is not None) == (table_version >= 8)  # layout 2 names it

    # the savepoint shares its time with the commit: the commit is still the instant at it
    timeline = table.timeline()
    at_first = timeline.get(first)
    assert at_first is not None and at_first.action is Action.COMMIT


def test_removing_a_savepoint_deletes_its_instant_files(tmp_path: Path, table_version: int) -> None:
    base = cow_with_versions(tmp_path, upserts=1, table_version=table_version)
    table = HudiTable.open(base)
    first = table.timeline().completed(WRITE_COMMIT_ACTIONS)[0].requested_time
    create_savepoint(table, first, user="ops")
    timeline_dir = Path(base, table.config.timeline_path)
    assert [p.name for p in timeline_dir.iterdir() if ".savepoint" in p.name]

    assert delete_savepoint(table, first) is True
    assert not [p.name for p in timeline_dir.iterdir() if ".savepoint" in p.name]
    assert list_savepoints(table) == []
    assert delete_savepoint(table, first) is False  # none there: nothing to do


def test_only_a_completed_write_inside_the_clean_window_is_savepointed(
    tmp_path: Path, table_version: int
) -> None:
    base = cow_with_versions(tmp_path, upserts=3, table_version=table_version)
    table = HudiTable.open(base)
    commits = [i.requested_time for i in table.timeline().completed(WRITE_COMMIT_ACTIONS)]

    with pytest.raises(SavepointRefusedError, match="not an instant time"):
        create_savepoint(table, "yesterday", user="ops")
    with pytest.raises(SavepointRefusedError, match="not a completed commit"):
        create_savepoint(table, "20200101000000000", user="ops")
    clean = schedule_clean(table, policy="KEEP_LATEST_COMMITS", retained=1)
    assert clean is not None
    with pytest.raises(SavepointRefusedError, match="not a completed commit"):
        create_savepoint(table, clean, user="ops")  # a clean is not a write
    # the pending clean retains from its earliest instant on: older ones may be cleaned
    with pytest.raises(SavepointRefusedError, match=r"older than .* the earliest commit"):
        create_savepoint(table, commits[0], user="ops")
    assert list_savepoints(table) == []
    savepoint, made = create_savepoint(table, commits[-1], user="ops")
    assert made and savepoint.files > 0


def test_the_cleaner_keeps_what_a_savepoint_names(tmp_path: Path, table_version: int) -> None:
    base = cow_with_versions(tmp_path, upserts=3, table_version=table_version)
    table = HudiTable.open(base)
    first = table.timeline().completed(WRITE_COMMIT_ACTIONS)[0].requested_time
    create_savepoint(table, first, user="ops")
    kept = [n for names in savepointed_files(table, first).values() for n in names]

    clean = schedule_clean(table, policy=KEEP_LATEST_FILE_VERSIONS, retained=1)
    assert clean is not None
    plan = table.timeline().avro_details(
        table.timeline().pending((Action.CLEAN,))[0], State.REQUESTED
    )
    assert plan is not None
    planned = {
        Path(entry["filePath"]).name
        for entries in (plan.get("filePathsToBeDeletedPerPartition") or {}).values()
        for entry in entries
    }
    assert planned  # older versions go, but none the savepoint names
    assert not planned & set(kept)
    assert plan["extraMetadata"] == {"savepointed_timestamps": first}


def test_a_savepoint_on_a_table_hudi_wrote(tmp_path: Path) -> None:
    """On a fixture Hudi 1.x wrote (merge-on-read with a metadata table): the latest slices'
    base and log files, and nothing written to the metadata table."""
    root = unzip_fixture("mor_avro_v9_txns_simple_meta", tmp_path)
    table = HudiTable.open(str(root))
    latest = table.timeline().completed(WRITE_COMMIT_ACTIONS)[-1].requested_time
    metadata_before = sorted(p.name for p in (root / ".hoodie" / "metadata").rglob("*"))
    savepoint, made = create_savepoint(table, latest, user="ops")
    slices = table.file_system_view().latest_file_slices()
    assert made and savepoint.files == sum(
        (1 if s.base_file else 0) + len(s.log_files) for s in slices
    )
    assert sorted(p.name for p in (root / ".hoodie" / "metadata").rglob("*")) == metadata_before
