"""`tms timeline` and `tms files` on a writer-made table, against the oracle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from tests import oracle
from tests.hudi.test_timeline import new_table, next_time, put, write
from tms.cli import app
from tms.hudi.avro import codec as avro_codec
from tms.hudi.properties import MERGE_ON_READ

SLICE_KEYS = ("partition", "file_id", "base_instant", "base_file", "log_files")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A partitioned merge-on-read table with updates in log files and a pending clean."""
    base = str(tmp_path_factory.mktemp("cli") / "trips")
    writer = new_table(base, MERGE_ON_READ, partitioned=True)
    write(writer, "insert", range(120), 1)
    write(writer, "upsert", range(0, 120, 3), 2)
    write(writer, "delete", range(0, 120, 10), 3)
    clean = next_time(base)
    put(
        base,
        f"{clean}.clean.requested",
        avro_codec.encode("HoodieCleanerPlan", {"policy": "KEEP_LATEST_COMMITS"}),
    )
    return base


def test_timeline_json_agrees_with_the_oracle(table: str) -> None:
    result = invoke("timeline", "--base-path", table, "--json")
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = json.loads(result.stdout)
    assert (shown["table"], shown["base_path"], shown["table_version"]) == ("trips", table, 6)
    completed = [
        (r["instant"], r["action"]) for r in shown["instants"] if r["state"] == "COMPLETED"
    ]
    assert completed == oracle.completed_instants(table)
    assert [r["action"] for r in shown["instants"]] == ["deltacommit"] * 3 + ["clean"]
    assert shown["instants"][-1]["state"] == "REQUESTED"
    assert all(r["requested_as"] == r["action"] for r in shown["instants"])


def test_timeline_table_lists_every_instant(table: str) -> None:
    result = invoke("timeline", "--base-path", table)
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["INSTANT", "ACTION", "STATE", "COMPLETION_TIME", "REQUESTED_AS"]
    completed = oracle.completed_instants(table)
    assert [row.split()[:3] for row in rows] == [
        *([ts, action, "COMPLETED"] for ts, action in completed),
        [rows[-1].split()[0], "clean", "REQUESTED"],
    ]
    assert rows[0].split()[3] == "-"  # layout 1 records no completion time


def test_files_json_agrees_with_the_oracle(table: str) -> None:
    result = invoke("files", "--base-path", table, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    slices = sorted(
        ({k: s[k] for k in SLICE_KEYS} for s in shown["file_slices"]),
        key=lambda s: (s["partition"], s["file_id"]),
    )
    assert slices == oracle.file_slices(table)
    assert any(s["log_files"] for s in slices)
    assert all(s["base_file_size"] > 0 for s in shown["file_slices"])


def test_files_table_shows_every_latest_slice(table: str) -> None:
    result = invoke("files", "--base-path", table)
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["PARTITION", "FILE_ID", "BASE_INSTANT", "BASE_FILE", "LOG_FILES"]
    expected = oracle.file_slices(table)
    assert sorted(row.split() for row in rows) == sorted(
        [
            s["partition"],
            s["file_id"],
            s["base_instant"],
            s["base_file"],
            ",".join(s["log_files"]) or "-",
        ]
        for s in expected
    )


@pytest.mark.parametrize("command", ["timeline", "files"])
@pytest.mark.parametrize("where", ["empty", "missing", "file", "unknown-scheme"])
def test_a_path_without_a_table_is_a_one_line_error(
    tmp_path: Path, command: str, where: str
) -> None:
    paths = {
        "empty": str(tmp_path),
        "missing": str(tmp_path / "nowhere"),
        "file": str(tmp_path / "plain.txt"),
        "unknown-scheme": "nosuchfs://bucket/table",
    }
    (tmp_path / "plain.txt").write_text("not a table")
    for as_json in ([], ["--json"]):
        result = invoke(command, "--base-path", paths[where], *as_json)
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ")
        assert paths[where] in lines[0]


def test_the_installed_command_exits_2_without_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tms", "timeline", "--base-path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"error: no Hudi table at {tmp_path}: .hoodie/hoodie.properties is missing"
    ]
