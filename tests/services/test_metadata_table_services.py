"""Compaction, clustering and clean on the real Hudi 1.1 tables with a metadata table: the
metadata table stays true (hudi-rs planning from it agrees with hudi-rs listing storage, our
`files` equal the listing view, stats and the record index match the files), a crash at any
step recovers, and a table whose metadata table is being built is refused untouched."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import tms.services.metadata_sync as metadata_sync
from tests import oracle
from tests.hudi.test_fixture_views import (
    WITH_METADATA_TABLE,
    rows_of,
    unzip_fixture,
    without_metadata_table,
)
from tests.hudi.test_metadata_reader import committed_files_on_storage, file_id_of, live_rows
from tms.cli import app
from tms.hudi.files.names import BaseFileName, LogFileName
from tms.hudi.metadata.column_stats import column_stats_entries, range_from_payload
from tms.hudi.metadata.listing import metadata_file_system_view
from tms.hudi.metadata.partition_stats import (
    column_types,
    files_counted,
    partition_stats_entries,
)
from tms.hudi.metadata.reader import MetadataTableReader
from tms.hudi.metadata.stats_keys import column_stats_key
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action, State
from tms.services.clean.execute import execute_clean, schedule_clean
from tms.services.clustering.execute import execute_clustering, schedule_clustering
from tms.services.compaction.execute import execute_compaction, schedule_compaction
from tms.services.table_refusals import unsupported_features

pytestmark = [pytest.mark.spark]

SECONDARY_INDEXES = ("merchant_idx", "txn_date_idx")
MOR = "mor_avro_v9_txns_simple_meta"


def copy_of(name: str, tmp_path: Path) -> Path:
    return unzip_fixture(name, tmp_path / name)


def reader_of(root: Path) -> MetadataTableReader:
    return MetadataTableReader.open(Storage(str(root)))


def rows(root: Path) -> list[dict[str, Any]]:
    table = oracle.snapshot(str(root))
    data = [c for c in table.column_names if not c.startswith("_hoodie")]
    return sorted(table.select(data).to_pylist(), key=lambda r: r["txn_id"])


def listing_copy(root: Path, into: Path) -> Path:
    """A copy of the table read by listing storage (no metadata table)."""
    shutil.copytree(root, into)
    return without_metadata_table(into)


def secondary(root: Path) -> dict[str, list[tuple[str | None, str]]]:
    reader = reader_of(root)
    return {name: reader.secondary_index(name) for name in SECONDARY_INDEXES}


def assert_metadata_table_true(root: Path, tmp_path: Path, before_rows: list[Any]) -> None:
    """Everything a user of the metadata table would notice, checked against storage."""
    hudi = HudiTable.open(str(root))
    assert unsupported_features(hudi) == []
    listed = listing_copy(root, tmp_path / f"listed-{len(list(tmp_path.iterdir()))}")
    # hudi-rs planning from `files` and hudi-rs listing storage: same rows, same slices
    assert rows(root) == rows(listed) == before_rows
    assert oracle.file_slices(str(root)) == oracle.file_slices(str(listed))
    # our `files` equal the committed files of the listing view
    reader = reader_of(root)
    ours = rows_of(metadata_file_system_view(reader).latest_file_slices())
    assert ours == rows_of(hudi.file_system_view().latest_file_slices())
    view = hudi.file_system_view()
    assert reader.all_files() == committed_files_on_storage(root)
    # column stats of every latest base file are what its footer gives
    definitions = reader.index_definitions
    columns = list(definitions["column_stats"].source_fields)
    version = definitions["column_stats"].version
    for piece in view.latest_file_slices():
        if piece.base_file is None:
            continue
        footer = pq.ParquetFile(root / piece.base_file.path).metadata
        for key, payload in column_stats_entries(
            piece.partition_path, piece.base_file.file_name, footer, columns, version
        ):
            stored = reader.lookup("column_stats", [key])[key]
            assert stored.fields["ColumnStatsMetadata"] == payload
    # partition stats: a recomputation over the partition's latest files
    schema = json.loads(hudi.timeline().latest_schema() or "{}")
    types = column_types(schema, columns)
    stats = reader.read_partition("column_stats")
    for partition in reader.partition_list():
        latest = view.latest_merged_file_slices(partition)
        ranges = []
        for name in files_counted(latest, latest):
            for column in columns:
                record = stats.get(column_stats_key(partition, name, column))
                if record is not None:
                    payload = record.fields["ColumnStatsMetadata"]
                    if not payload["isDeleted"]:
                        ranges.append(range_from_payload(payload))
        for key, payload in partition_stats_entries(partition, ranges, types, columns):
            stored = reader.lookup("partition_stats", [key])[key].fields["ColumnStatsMetadata"]
            assert (stored["minValue"], stored["maxValue"]) == (
                payload["minValue"],
                payload["maxValue"],
            ), f"{partition} {payload['columnName']}"
    # no stats of files that are gone
    live = {(p, n) for p, names in reader.all_files().items() for n in names}
    for record in stats.values():
        payload = record.fields["ColumnStatsMetadata"]
        if not payload["isDeleted"]:
            assert any(n == payload["fileName"] for _, n in live), payload["fileName"]
    # record index: every live key at the file group holding it
    snapshot = live_rows(root, "_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name")
    expected = {
        r["_hoodie_record_key"]: (r["_hoodie_partition_path"], file_id_of(r["_hoodie_file_name"]))
        for r in snapshot
    }
    located = reader.record_locations(list(expected))
    assert {k: (v.partition_path, v.file_id) for k, v in located.items()} == expected


def write_token_of(path: str | None) -> str:
    name = str(path).rsplit("/", 1)[-1]
    parsed = LogFileName.parse(name) or BaseFileName.parse(name)
    assert parsed is not None, name
    return parsed.write_token


def latest_delta_commit(root: Path) -> str:
    return reader_of(root).timeline.instants[-1].requested_time


@pytest.fixture(params=WITH_METADATA_TABLE)
def fixture_root(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return copy_of(request.param, tmp_path)


def run_cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


def test_clustering_moves_the_record_index_to_the_new_file_groups(
    fixture_root: Path, tmp_path: Path
) -> None:
    before, indexes = rows(fixture_root), secondary(fixture_root)
    run_cli("run", "clustering", "--base-path", str(fixture_root), "--master", "local[1]")
    timeline = HudiTable.open(str(fixture_root)).timeline()
    instant = timeline.completed((Action.REPLACE_COMMIT,))[-1]
    assert instant.requested_time == latest_delta_commit(fixture_root)
    replaced = timeline.commit_metadata(instant).partition_to_replace_file_ids
    assert replaced
    # replaced file groups' files stay listed in `files` until clean deletes them
    listed = reader_of(fixture_root).all_files()
    for partition, ids in replaced.items():
        assert {file_id_of(n) for n in listed[partition]} >= set(ids)
    assert secondary(fixture_root) == indexes
    # the record index entries were written by the tasks that wrote the new base files (the
    # same write tokens), not gathered on the driver
    new_files = [s.path for _, s in timeline.commit_metadata(instant).iter_write_stats()]
    delta_commit = reader_of(fixture_root).timeline.get(instant.requested_time)
    assert delta_commit is not None
    index_logs = [
        s.path
        for p, s in reader_of(fixture_root)
        .timeline.commit_metadata(delta_commit)
        .iter_write_stats()
        if p == "record_index"
    ]
    assert index_logs
    assert {write_token_of(p) for p in index_logs} <= {write_token_of(p) for p in new_files}
    assert_metadata_table_true(fixture_root, tmp_path, before)


def test_clean_after_clustering_deletes_files_and_their_stats(
    fixture_root: Path, tmp_path: Path
) -> None:
    before = rows(fixture_root)
    run_cli("run", "clustering", "--base-path", str(fixture_root), "--master", "local[1]")
    run_cli(
        "run", "clean", "--base-path", str(fixture_root), "--retain", "1", "--master", "local[1]"
    )
    timeline = HudiTable.open(str(fixture_root)).timeline()
    clean = timeline.completed((Action.CLEAN,))[-1]
    deleted = timeline.clean_metadata(clean)["totalFilesDeleted"]
    assert deleted > 0
    assert clean.requested_time == latest_delta_commit(fixture_root)
    assert_metadata_table_true(fixture_root, tmp_path, before)


# Crashes ---------------------------------------------------------------------------------------


class Crash(Exception):
    """Stands for the process dying at this point."""


def crash_after_metadata_inflight(monkeypatch: pytest.MonkeyPatch) -> None:
    real = metadata_sync.finish_delta_commit

    def dying(*args: Any) -> Any:
        from tms.hudi.timeline import transitions

        original = transitions.transition

        def stop(s: Storage, c: Any, i: Any, state: State, *a: Any) -> Any:
            if state is State.COMPLETED:
                raise Crash
            return original(s, c, i, state, *a)

        monkeypatch.setattr("tms.hudi.metadata.writer.transition", stop)
        try:
            return real(*args)
        finally:
            monkeypatch.setattr("tms.hudi.metadata.writer.transition", original)

    monkeypatch.setattr(metadata_sync, "finish_delta_commit", dying)


def crash_after_metadata_completed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = metadata_sync.finish_delta_commit

    def dying(*args: Any) -> Any:
        real(*args)
        raise Crash

    monkeypatch.setattr(metadata_sync, "finish_delta_commit", dying)


CRASHES: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "metadata-inflight": crash_after_metadata_inflight,
    "metadata-completed": crash_after_metadata_completed,
}


@pytest.mark.parametrize("service", ["clustering", "clean"])
@pytest.mark.parametrize("crash", sorted(CRASHES))
def test_a_crash_at_each_step_recovers_on_rerun(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, service: str, crash: str
) -> None:
    root = copy_of(MOR, tmp_path)
    before = rows(root)
    if service == "clean":
        clustered = schedule_clustering(HudiTable.open(str(root)))
        assert clustered is not None
        execute_clustering(spark, HudiTable.open(str(root)), clustered)
    table = HudiTable.open(str(root))
    schedule: dict[str, Callable[[], str | None]] = {
        "compaction": lambda: schedule_compaction(table),
        "clustering": lambda: schedule_clustering(table),
        "clean": lambda: schedule_clean(table, retained=1),
    }
    execute = {
        "compaction": execute_compaction,
        "clustering": execute_clustering,
        "clean": execute_clean,
    }[service]
    instant = schedule[service]()
    assert instant is not None
    with monkeypatch.context() as patched:
        CRASHES[crash](patched)
        with pytest.raises(Crash):
            execute(spark, HudiTable.open(str(root)), instant, heartbeat_interval=0.01)
    timeline = HudiTable.open(str(root)).timeline()
    assert not timeline.is_completed(instant)
    assert reader_of(root).timeline.get(instant) is not None
    # readers still see the table as before the crash
    assert rows(root) == before

    execute(spark, HudiTable.open(str(root)), instant, heartbeat_interval=0.01)

    assert HudiTable.open(str(root)).timeline().is_completed(instant)
    mdt = reader_of(root).timeline
    completed = [i for i in mdt.instants if i.requested_time == instant]
    assert len(completed) == 1 and completed[0].is_completed
    if service != "clean":  # a crashed clean is finished, not rolled back
        rollbacks = [i for i in mdt.instants if i.action is Action.ROLLBACK]
        assert rollbacks and all(i.is_completed for i in rollbacks)
    assert_metadata_table_true(root, tmp_path, before)


# Refusals --------------------------------------------------------------------------------------


def checksums(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize("service", ["compaction", "clustering", "clean"])
def test_a_metadata_partition_being_built_is_refused_untouched(
    fixture_root: Path, service: str
) -> None:
    properties = fixture_root / ".hoodie" / "hoodie.properties"
    text = properties.read_text().replace(
        "hoodie.table.metadata.partitions.inflight=",
        "hoodie.table.metadata.partitions.inflight=expr_index_amount",
    )
    properties.write_text(text)
    before = checksums(fixture_root)
    result = CliRunner().invoke(
        app, ["run", service, "--base-path", str(fixture_root), "--executor", "native"]
    )
    assert result.exit_code == 2, result.output
    assert "expr_index_amount" in result.stderr and "being built" in result.stderr
    assert checksums(fixture_root) == before
