"""Metadata tables the services cannot keep true are refused before anything is written, each
with its reason: partitions we do not keep, a partitioned record index, partition stats without
column stats, a missing metadata table folder, a Hudi 0.x table version."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.hudi.test_fixture_views import unzip_fixture
from tests.services.test_metadata_table_services import checksums
from typer.testing import CliRunner

from tms.cli import app
from tms.hudi.table import HudiTable
from tms.services.table_refusals import unsupported_features

FIXTURE = "cow_v9_txns_simple_meta"
PARTITIONS = (
    "column_stats,files,partition_stats,record_index,"
    "secondary_index_merchant_idx,secondary_index_txn_date_idx"
)


def set_property(root: Path, key: str, value: str) -> None:
    properties = root / ".hoodie" / "hoodie.properties"
    lines = [
        f"{key}={value}" if line.startswith(f"{key}=") else line
        for line in properties.read_text().splitlines()
    ]
    properties.write_text("\n".join(lines) + "\n")


def partitioned_record_index(root: Path) -> None:
    path = root / ".hoodie" / ".index_defs" / "index.json"
    definitions = json.loads(path.read_text())
    definitions["indexDefinitions"]["record_index"]["indexOptions"]["isPartitioned"] = "true"
    path.write_text(json.dumps(definitions))


def partition_stats_alone(root: Path) -> None:
    set_property(root, "hoodie.table.metadata.partitions", "files,partition_stats")


def no_metadata_folder(root: Path) -> None:
    shutil.rmtree(root / ".hoodie" / "metadata")


def table_version_6(root: Path) -> None:
    set_property(root, "hoodie.table.version", "6")


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "partitioned_record_index": (partitioned_record_index, "partitioned record index"),
    "partition_stats_alone": (partition_stats_alone, "partition_stats without column_stats"),
    "no_metadata_folder": (no_metadata_folder, ".hoodie/metadata is missing"),
    "table_version_6": (table_version_6, "table version 6"),
}


def test_the_fixture_as_written_is_accepted(tmp_path: Path) -> None:
    root = unzip_fixture(FIXTURE, tmp_path)
    assert unsupported_features(HudiTable.open(str(root))) == []


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_metadata_table_we_cannot_keep_is_refused_with_its_reason(
    tmp_path: Path, case: str
) -> None:
    root = unzip_fixture(FIXTURE, tmp_path)
    change, reason = CASES[case]
    change(root)
    reasons = unsupported_features(HudiTable.open(str(root)))
    assert any(reason in r for r in reasons), reasons


@pytest.mark.parametrize("case", ["partition_stats_alone", "partitioned_record_index"])
def test_tms_run_refuses_it_untouched(tmp_path: Path, case: str) -> None:
    root = unzip_fixture(FIXTURE, tmp_path)
    change, reason = CASES[case]
    change(root)
    before = checksums(root)
    result = CliRunner().invoke(
        app, ["run", "clean", "--base-path", str(root), "--executor", "native"]
    )
    assert result.exit_code == 2, result.output
    assert reason in result.stderr
    assert checksums(root) == before
