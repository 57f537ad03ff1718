"""Real tables written by Hudi 1.x (`tests/fixtures`): our file-system view and `tms files`
against hudi-rs, on the tables as written and at every earlier point of their timelines."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from tests import oracle
from tests.fixture_paths import HUDI_TABLES
from typer.testing import CliRunner

from tms.cli import app
from tms.hudi.files.fs_view import FileSlice
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State, parse_instant_file

FIXTURES = HUDI_TABLES
WITHOUT_METADATA_TABLE = [
    "cow_v8_nonpartitioned",
    "cow_v9_txns_simple_nometa",
    "mor_avro_v9_txns_simple_nometa",
]
WITH_METADATA_TABLE = ["cow_v9_txns_simple_meta", "mor_avro_v9_txns_simple_meta"]
SLICE_KEYS = ("partition", "file_id", "base_instant", "base_file", "log_files")


def unzip_fixture(name: str, into: Path) -> Path:
    """The table folder of a fixture, unzipped under `into` (the zip stays untouched)."""
    archive = FIXTURES / f"{name}.zip"
    assert archive.is_file(), f"fixture {archive} is missing"
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(into)
    roots = [p.parent.parent for p in into.glob("*/.hoodie/hoodie.properties")]
    assert len(roots) == 1, f"{archive} holds {roots}"
    return roots[0]


def without_metadata_table(root: Path) -> Path:
    """The fixtures README's way to read a table by listing: no `.hoodie/metadata`, and no
    metadata partitions named in `hoodie.properties`."""
    shutil.rmtree(root / ".hoodie" / "metadata")
    properties = root / ".hoodie" / "hoodie.properties"
    text = properties.read_text()
    text = re.sub(
        r"(?m)^hoodie\.table\.metadata\.partitions=.*$", "hoodie.table.metadata.partitions=", text
    )
    properties.write_text(text)
    return root


@pytest.fixture(params=WITHOUT_METADATA_TABLE + WITH_METADATA_TABLE)
def fixture_table(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    root = unzip_fixture(request.param, tmp_path)
    if request.param in WITH_METADATA_TABLE:
        root = without_metadata_table(root)
    return root


def normalised(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Slice rows keyed as the oracle keys them ('' for a missing base file, as hudi-rs)."""
    return sorted(
        ({k: (row[k] if row[k] is not None else "") for k in SLICE_KEYS} for row in rows),
        key=lambda s: (s["partition"], s["file_id"]),
    )


def rows_of(slices: list[FileSlice]) -> list[dict[str, Any]]:
    return normalised([s.describe() for s in slices])


def cli_files(base: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(app, ["files", "--base-path", str(base), "--json"])
    assert result.exit_code == 0, result.output
    return normalised(json.loads(result.stdout)["file_slices"])


def test_tms_files_agrees_with_hudi_rs_on_every_fixture(fixture_table: Path) -> None:
    expected = oracle.file_slices(str(fixture_table))
    assert expected, "the oracle sees no file slices"
    assert cli_files(fixture_table) == expected


def instant_times(root: Path) -> list[str]:
    timeline = root / ".hoodie" / "timeline"
    found = {parse_instant_file(p.name) for p in timeline.iterdir() if p.is_file()}
    return sorted({i.requested_time for i in found if i is not None})


def drop_instant(root: Path, requested_time: str, completed_only: bool = False) -> None:
    """Take an instant off the timeline (all its files, or only the completed one)."""
    timeline = root / ".hoodie" / "timeline"
    for path in timeline.iterdir():
        instant = parse_instant_file(path.name)
        if instant is None or instant.requested_time != requested_time:
            continue
        if completed_only and instant.state is not State.COMPLETED:
            continue
        path.unlink()


def test_every_point_of_each_fixture_timeline_agrees_with_hudi_rs(fixture_table: Path) -> None:
    """Taking instants off the end one by one walks the table back through each state it had
    (log files in slices, before and after compaction and clustering); at each one our latest
    slices equal hudi-rs's."""
    merge_on_read = HudiTable.open(str(fixture_table)).config.table_type == "MERGE_ON_READ"
    seen_logs = 0
    for requested_time in reversed(instant_times(fixture_table)):
        expected = oracle.file_slices(str(fixture_table))
        view = HudiTable.open(str(fixture_table)).file_system_view()
        assert rows_of(view.latest_file_slices()) == expected, f"up to {requested_time}"
        seen_logs += sum(len(s["log_files"]) for s in expected)
        drop_instant(fixture_table, requested_time)
    if merge_on_read:
        assert seen_logs > 0, "a merge-on-read fixture should have had slices with log files"


@pytest.mark.parametrize("name", ["mor_avro_v9_txns_simple_nometa", "mor_avro_v9_txns_simple_meta"])
def test_a_pending_compaction_splits_slices_on_a_real_table(name: str, tmp_path: Path) -> None:
    """The table just before its compaction completed: the compacted file groups get a new,
    empty slice at the compaction instant (Hudi's latest slice, where writers append), and the
    slice a snapshot reads (merged) is hudi-rs's, which does not split at pending compactions."""
    root = unzip_fixture(name, tmp_path)
    if name in WITH_METADATA_TABLE:
        root = without_metadata_table(root)
    timeline = HudiTable.open(str(root)).timeline()
    compaction = timeline.last_compaction()
    assert compaction is not None
    for later in instant_times(root):
        if later > compaction.requested_time:
            drop_instant(root, later)
    drop_instant(root, compaction.requested_time, completed_only=True)

    table = HudiTable.open(str(root))
    pending = table.timeline().pending_compactions()
    assert [(i.requested_time, i.action) for i in pending] == [
        (compaction.requested_time, Action.COMPACTION)
    ]
    planned = table.file_system_view().pending_compaction_file_ids()
    assert planned

    view = table.file_system_view()
    assert rows_of(view.latest_merged_file_slices()) == oracle.file_slices(str(root))
    for group in view.file_groups:
        latest = group.latest_slice
        if (group.partition_path, group.file_id) in planned:
            assert latest.base_instant_time == compaction.requested_time
            assert latest.base_file is None and not latest.log_files
            assert group.slices[-2].base_file is not None
        else:
            assert latest.base_instant_time < compaction.requested_time
