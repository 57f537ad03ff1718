"""The table services on copies of real tables Hudi 1.x wrote (the shared fixtures), judged by
hudi-rs before and after (tables with a metadata table: test_metadata_table_services.py)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests import oracle
from tests.crash import run_tms
from tests.hudi.test_fixture_views import WITHOUT_METADATA_TABLE, unzip_fixture
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.table import HudiTable
from tms.hudi.timeline.instant import Action
from tms.services.registry import table_service
from tms.testing.sample_writer.writer import HudiWriter

MERGE_ON_READ_FIXTURE = "mor_avro_v9_txns_simple_nometa"


def copy_of(name: str, tmp_path: Path) -> str:
    return str(unzip_fixture(name, tmp_path))


def rows_of(base: str) -> pa.Table:
    """The table's current rows as a writer would send them (no meta columns)."""
    return oracle.snapshot(base).drop_columns([RECORD_KEY])


def update_some(base: str) -> None:
    """A delta commit by our writer updating rows in every partition: log files to compact."""
    rows = rows_of(base)
    later = pc.add(rows["txn_ts"], pa.scalar(1000, rows["txn_ts"].type))
    rows = rows.set_column(rows.schema.get_field_index("txn_ts"), "txn_ts", later)
    HudiWriter(HudiTable.open(base)).upsert(rows.take(list(range(0, rows.num_rows, 2))))


def insert_new_keys(base: str) -> None:
    """A commit by our writer adding keys: small file groups beside Hudi's."""
    rows = rows_of(base)
    key = HudiTable.open(base).config.record_key_fields[0]
    offset = pa.scalar(1_000_000, rows[key].type)
    HudiWriter(HudiTable.open(base), max_file_rows=1).insert(
        rows.set_column(rows.schema.get_field_index(key), key, pc.add(rows[key], offset))
    )


def data_files(base: str) -> set[str]:
    """Data files on storage (base and log files), relative to the base path."""
    root = Path(base)
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file()
        and ".hoodie" not in p.relative_to(root).parts
        and not p.name.startswith(".hoodie_partition_metadata")
    }


def latest_slice_files(base: str) -> set[str]:
    """Files of the latest file slices, as hudi-rs lists them."""
    found: set[str] = set()
    for piece in oracle.file_slices(base):
        folder = f"{piece['partition']}/" if piece["partition"] else ""
        names = ([piece["base_file"]] if piece["base_file"] else []) + piece["log_files"]
        found.update(folder + name for name in names)
    return found


def run_service(spark: Any, base: str, action: str, params: dict[str, Any]) -> str | None:
    """Schedule and execute through the registry, as `tms run` and the job do."""
    service = table_service(action)
    instant = service.schedule(HudiTable.open(base), params)
    if instant is not None:
        service.execute(spark, HudiTable.open(base), instant, heartbeat_interval=5)
    return instant


@pytest.mark.spark
def test_compaction_of_a_hudi_written_merge_on_read_table(spark: Any, tmp_path: Path) -> None:
    base = copy_of(MERGE_ON_READ_FIXTURE, tmp_path)
    update_some(base)
    before = oracle.snapshot(base)
    with_logs = {s["file_id"] for s in oracle.file_slices(base) if s["log_files"]}
    assert len(with_logs) >= 2

    instant = run_service(spark, base, "compaction", {})

    assert instant is not None
    assert oracle.snapshot(base).equals(before)
    after = {s["file_id"]: s for s in oracle.file_slices(base)}
    assert not [s for s in after.values() if s["log_files"]]
    assert {f for f, s in after.items() if s["base_instant"] == instant} == with_logs
    assert (instant, "commit") in oracle.completed_instants(base)


PREPARE_FOR_CLUSTERING: dict[str, Callable[[str], None]] = {
    # one file group only: small ones beside it make clustering worth planning
    "cow_v8_nonpartitioned": insert_new_keys,
}


def test_clustering_plans_nothing_for_a_single_file_group(tmp_path: Path) -> None:
    base = copy_of("cow_v8_nonpartitioned", tmp_path)
    assert len(oracle.file_slices(base)) == 1
    before = checksums(base)
    assert table_service("clustering").schedule(HudiTable.open(base), {}) is None
    assert checksums(base) == before


@pytest.mark.spark
@pytest.mark.parametrize("name", WITHOUT_METADATA_TABLE)
def test_clustering_of_a_hudi_written_table(spark: Any, tmp_path: Path, name: str) -> None:
    base = copy_of(name, tmp_path)
    PREPARE_FOR_CLUSTERING.get(name, lambda _: None)(base)
    before = oracle.snapshot(base)
    slices_before = oracle.file_slices(base)

    instant = run_service(spark, base, "clustering", {})

    assert instant is not None
    assert oracle.snapshot(base).equals(before)
    timeline = HudiTable.open(base).timeline()
    done = timeline.get(instant)
    assert done is not None and done.is_completed and done.action is Action.REPLACE_COMMIT
    planned = timeline.clustering_plan(done)["inputGroups"]
    replaced = {piece["fileId"] for group in planned for piece in group["slices"]}
    slices_after = oracle.file_slices(base)
    assert replaced and not replaced & {s["file_id"] for s in slices_after}
    assert len(slices_after) < len(slices_before)
    assert (instant, "replacecommit") in oracle.completed_instants(base)


@pytest.mark.spark
@pytest.mark.parametrize("name", WITHOUT_METADATA_TABLE)
def test_clean_of_a_hudi_written_table(spark: Any, tmp_path: Path, name: str) -> None:
    base = copy_of(name, tmp_path)
    before = oracle.snapshot(base)
    slices_before = oracle.file_slices(base)
    latest = latest_slice_files(base)
    on_storage = data_files(base)
    assert latest < on_storage, "older file versions to clean"

    params = {"policy": "KEEP_LATEST_FILE_VERSIONS", "retained": 1}
    instant = run_service(spark, base, "clean", params)

    # one version per file group is what the policy keeps: exactly the latest slices stay
    assert instant is not None
    assert data_files(base) == latest
    assert oracle.snapshot(base).equals(before)
    assert oracle.file_slices(base) == slices_before
    metadata = (
        HudiTable.open(base)
        .timeline()
        .clean_metadata(HudiTable.open(base).timeline().completed((Action.CLEAN,))[-1])
    )
    assert metadata["totalFilesDeleted"] == len(on_storage - latest)


def checksums(base: str) -> dict[str, str]:
    """Every file of the table folder with a digest of its bytes."""
    root = Path(base)
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.mark.spark
def test_tms_run_clean_keeping_latest_commits_of_a_hudi_written_table(tmp_path: Path) -> None:
    base = copy_of("cow_v9_txns_simple_nometa", tmp_path)
    before = oracle.snapshot(base)
    slices_before = oracle.file_slices(base)
    latest = latest_slice_files(base)
    on_storage = data_files(base)

    args = ["run", "clean", "--base-path", base, "--policy", "KEEP_LATEST_COMMITS"]
    done = run_tms([*args, "--retain", "2", "--master", "local[1]", "--json"])

    assert done.returncode == 0, done.stderr[-3000:]
    deleted = on_storage - data_files(base)
    assert deleted and not deleted & latest  # older versions only, never a latest slice
    assert json.loads(done.stdout)["files_deleted"] == len(deleted)
    assert oracle.snapshot(base).equals(before)
    assert oracle.file_slices(base) == slices_before
    timeline = HudiTable.open(base).timeline()
    (clean,) = timeline.completed((Action.CLEAN,))
    assert clean.completion_time is not None  # named `<requested>_<completion>.clean`
    commits = [i.requested_time for i in timeline.commits()]
    assert timeline.clean_metadata(clean)["earliestCommitToRetain"] == commits[-2]
