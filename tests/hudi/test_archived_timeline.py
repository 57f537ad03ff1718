"""The archived timeline of layout 2 (`.hoodie/timeline/history/`), on LSM layouts built as
Hudi 1.x's `LSMTimelineWriter` lays them out: Parquet files `<min>_<max>_<layer>.parquet` of
`HoodieLSMTimelineInstant` rows, `manifest_<N>` listing a version's files, `_version_`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import Result
from tests.hudi.test_layout2 import FILE_A, Layout2Table, delta_commit, new_table, slices_of
from typer.testing import CliRunner

from tms.cli import app
from tms.hudi.avro.commit_metadata import CommitMetadata
from tms.hudi.errors import UnsafePathError
from tms.hudi.properties import TableConfig
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.archived import ArchivedTimeline, ArchivedTimelineError
from tms.hudi.timeline.instant import Action, State

HISTORY = ".hoodie/timeline/history"
LSM_SCHEMA = pa.schema(
    [
        ("instantTime", pa.string()),
        ("completionTime", pa.string()),
        ("action", pa.string()),
        ("metadata", pa.binary()),
        ("plan", pa.binary()),
        ("version", pa.int32()),
    ]
)
Row = tuple[str, str, str]
"""(requested time, completion time, action) of one archived instant."""

A1 = ("20240101000000000", "20240101000001000", "deltacommit")
A2 = ("20240101000100000", "20240101000101000", "deltacommit")
A3 = ("20240101000200000", "20240101000201000", "commit")  # a compaction completes as commit
A4 = ("20240101000300000", "20240101000301000", "clean")
A5 = ("20240101000400000", "20240101000401000", "replacecommit")


def write_lsm_file(storage: Storage, rows: list[Row], layer: int = 0) -> str:
    """One LSM file with these instants, named by their least requested and greatest
    completion time and the layer."""
    name = f"{min(r[0] for r in rows)}_{max(r[1] for r in rows)}_{layer}.parquet"
    table = pa.table(
        {
            "instantTime": [r[0] for r in rows],
            "completionTime": [r[1] for r in rows],
            "action": [r[2] for r in rows],
            "metadata": [b"{}"] * len(rows),
            "plan": [None] * len(rows),
            "version": [1] * len(rows),
        },
        schema=LSM_SCHEMA,
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    storage.write_bytes(f"{HISTORY}/{name}", sink.getvalue())
    return name


def write_manifest(storage: Storage, version: int, names: list[str]) -> None:
    files = [
        {"fileName": name, "fileLen": storage.info(f"{HISTORY}/{name}").size} for name in names
    ]
    storage.write_bytes(f"{HISTORY}/manifest_{version}", json.dumps({"files": files}).encode())


def write_version(storage: Storage, version: int | str) -> None:
    storage.write_bytes(f"{HISTORY}/_version_", str(version).encode())


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    storage = Storage(str(tmp_path / "t"))
    storage.makedirs(HISTORY)
    return storage


CONFIG = TableConfig({"hoodie.table.version": "9", "hoodie.timeline.layout.version": "2"})


def rows(archived: ArchivedTimeline) -> list[Row]:
    assert all(i.state is State.COMPLETED for i in archived.instants)
    return [(i.requested_time, i.completion_time or "", i.action.value) for i in archived.instants]


def test_no_history_reads_as_an_empty_archive(storage: Storage) -> None:
    assert ArchivedTimeline.load(storage, CONFIG) == ArchivedTimeline.empty()
    storage.delete_dir(HISTORY)
    assert ArchivedTimeline.load(storage, CONFIG).instants == ()


def test_instants_of_the_latest_version_in_requested_order(storage: Storage) -> None:
    first = write_lsm_file(storage, [A3, A1, A2])
    write_manifest(storage, 1, [first])
    write_version(storage, 1)
    second = write_lsm_file(storage, [A4, A5])
    write_manifest(storage, 2, [first, second])
    write_version(storage, 2)

    archived = ArchivedTimeline.load(storage, CONFIG)
    assert archived.version == 2
    assert rows(archived) == [A1, A2, A3, A4, A5]
    assert archived.completion_time(A3[0]) == A3[1]
    assert archived.completion_time("20240101000050000") is None
    replace = archived.get(A5[0])
    assert replace is not None and replace.action is Action.REPLACE_COMMIT


def test_files_the_latest_manifest_does_not_list_are_not_read(storage: Storage) -> None:
    """After an LSM compaction the layer-0 files stay on storage until cleaned; a stale file
    here also holds an instant nobody archived, which must not appear."""
    stale = ("20240101000150000", "20240101000151000", "deltacommit")
    l0_a = write_lsm_file(storage, [A1, A2, stale])
    l0_b = write_lsm_file(storage, [A3, A4])
    write_manifest(storage, 1, [l0_a, l0_b])
    l1 = write_lsm_file(storage, [A1, A2, A3, A4], layer=1)
    write_manifest(storage, 2, [l1])
    write_version(storage, 2)

    archived = ArchivedTimeline.load(storage, CONFIG)
    assert archived.files == (l1,)
    assert rows(archived) == [A1, A2, A3, A4]


def test_a_manifest_newer_than_the_version_file_is_not_read_yet(storage: Storage) -> None:
    """Hudi writes the manifest, then `_version_`: a manifest it names not yet is in progress."""
    first = write_lsm_file(storage, [A1])
    write_manifest(storage, 1, [first])
    write_version(storage, 1)
    second = write_lsm_file(storage, [A2])
    write_manifest(storage, 2, [first, second])

    assert rows(ArchivedTimeline.load(storage, CONFIG)) == [A1]


def test_without_a_version_file_the_highest_manifest_counts(storage: Storage) -> None:
    first = write_lsm_file(storage, [A1])
    second = write_lsm_file(storage, [A2])
    write_manifest(storage, 1, [first])
    write_manifest(storage, 2, [first, second])
    storage.write_bytes(f"{HISTORY}/manifest_3.tmp", b"{not json")
    assert rows(ArchivedTimeline.load(storage, CONFIG)) == [A1, A2]

    write_version(storage, "garbage")
    assert rows(ArchivedTimeline.load(storage, CONFIG)) == [A1, A2]


def test_a_manifest_naming_a_file_elsewhere_is_refused(storage: Storage) -> None:
    write_lsm_file(storage, [A1])
    storage.write_bytes(
        f"{HISTORY}/manifest_1", json.dumps({"files": [{"fileName": "../../x.parquet"}]}).encode()
    )
    write_version(storage, 1)
    with pytest.raises(UnsafePathError, match=r"x\.parquet"):
        ArchivedTimeline.load(storage, CONFIG)


def test_a_history_path_outside_the_timeline_is_refused(storage: Storage) -> None:
    config = TableConfig({**CONFIG.props, "hoodie.timeline.history.path": "../../data"})
    with pytest.raises(UnsafePathError, match=r"hoodie\.timeline\.history\.path"):
        ArchivedTimeline.load(storage, config)


def test_a_missing_or_broken_file_is_a_clear_error(storage: Storage) -> None:
    name = write_lsm_file(storage, [A1])
    write_manifest(storage, 1, [name])
    write_version(storage, 1)
    storage.write_bytes(f"{HISTORY}/{name}", b"not parquet")
    with pytest.raises(ArchivedTimelineError, match="not readable"):
        ArchivedTimeline.load(storage, CONFIG)
    storage.delete(f"{HISTORY}/{name}")
    with pytest.raises(ArchivedTimelineError, match="missing"):
        ArchivedTimeline.load(storage, CONFIG)
    write_version(storage, 7)
    with pytest.raises(ArchivedTimelineError, match="manifest_7"):
        ArchivedTimeline.load(storage, CONFIG)


# The file-system view takes an archived delta commit's completion time from the history.
RB = "20240201000000000"  # archived: wrote the base file
RL = "20240201000100000"  # archived: wrote a log file
RC, DC = "20240201000200000", "20240201000201000"  # active: compaction of the group


def table_with_archived_log(tmp_path: Path, log_completed: str | None) -> Layout2Table:
    """A group whose base file and first log were written by archived instants, compacted by
    the first active instant; the history records the log's delta commit as completed at
    `log_completed` (not at all when None)."""
    table = new_table(str(tmp_path / "t"), 9)
    table.base_file("p1", FILE_A, RB, [("a1", 1)])
    table.log_file("p1", FILE_A, RL, [("a1", 2)])
    compacted = table.base_file("p1", FILE_A, RC, [("a1", 2)])
    table.instant(f"{RC}.compaction.requested")
    table.instant(f"{RC}.compaction.inflight")
    done = CommitMetadata(operation_type="COMPACT", compacted=True)
    done.add_write_stat("p1", compacted)
    table.instant(f"{RC}_{DC}.commit", done.to_avro_bytes())
    archived = [(RB, "20240201000001000", "deltacommit")]
    if log_completed is not None:
        archived.append((RL, log_completed, "deltacommit"))
    name = write_lsm_file(table.storage, archived)
    write_manifest(table.storage, 1, [name])
    write_version(table.storage, 1)
    return table


def test_the_timeline_exposes_archived_instants_and_their_completion_times(
    tmp_path: Path,
) -> None:
    table = table_with_archived_log(tmp_path, "20240201000101000")
    timeline = HudiTable.open(table.base).timeline()
    assert [i.requested_time for i in timeline.archived.instants] == [RB, RL]
    assert timeline.completion_time(RL) == "20240201000101000"
    assert timeline.completion_time(RC) == DC
    assert timeline.completion_time("20240201000300000") is None  # never seen


def test_an_archived_log_belongs_to_the_slice_its_recorded_completion_time_falls_in(
    tmp_path: Path,
) -> None:
    before = table_with_archived_log(tmp_path / "before", "20240201000101000")
    assert slices_of(before.base, FILE_A) == [(RB, RB, [RL]), (RC, RC, [])]
    # completed after the compaction was requested: it belongs to the compaction's slice
    after = table_with_archived_log(tmp_path / "after", "20240201000250000")
    assert slices_of(after.base, FILE_A) == [(RB, RB, []), (RC, RC, [RL])]


def test_an_archived_log_with_no_recorded_completion_goes_to_the_latest_slice(
    tmp_path: Path,
) -> None:
    """Hudi 1.x treats a completion time it cannot find like a pending one."""
    table = table_with_archived_log(tmp_path, None)
    assert slices_of(table.base, FILE_A) == [(RB, RB, []), (RC, RC, [RL])]


def test_completion_times_of_active_legacy_and_pending_instants(tmp_path: Path) -> None:
    """A legacy instant (no completion time in its name) completed at its requested time;
    a pending one has none yet."""
    table = new_table(str(tmp_path / "t"), 9)
    table.instant(f"{RB}.deltacommit.requested")
    table.instant(f"{RB}.deltacommit.inflight")
    table.instant(f"{RB}.deltacommit", CommitMetadata(operation_type="UPSERT").to_json())
    delta_commit(table, RL, None, [])
    timeline = HudiTable.open(table.base).timeline()
    assert timeline.completion_time(RB) == RB
    assert timeline.completion_time(RL) is None
    assert timeline.archived.instants == ()


def run_cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def test_tms_timeline_lists_archived_instants_on_request(tmp_path: Path) -> None:
    table = table_with_archived_log(tmp_path, "20240201000101000")
    plain = json.loads(run_cli("timeline", "--base-path", table.base, "--json").stdout)
    assert "archived" not in plain
    result = run_cli("timeline", "--base-path", table.base, "--json", "--archived")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert [(r["instant"], r["completion_time"], r["state"]) for r in shown["archived"]] == [
        (RB, "20240201000001000", "ARCHIVED"),
        (RL, "20240201000101000", "ARCHIVED"),
    ]
    assert [r["instant"] for r in shown["instants"]] == [RC]
    text = run_cli("timeline", "--base-path", table.base, "--archived")
    assert text.exit_code == 0 and "ARCHIVED" in text.stdout


def test_tms_files_on_a_broken_history_exits_2_naming_the_file(tmp_path: Path) -> None:
    table = table_with_archived_log(tmp_path, "20240201000101000")
    name = HudiTable.open(table.base).timeline().archived.files[0]
    table.storage.write_bytes(f"{HISTORY}/{name}", b"not parquet")
    for command in (["files"], ["timeline", "--archived"]):
        result = run_cli(*command, "--base-path", table.base)
        assert result.exit_code == 2, result.output
        assert name in result.stderr and "Traceback" not in result.output
