"""`tms run --executor`: the service's choice of who runs a table service (`TableService.decide`)
on the command line. `native` refuses a table tms's own code declines; `auto` serves it with
Apache Hudi's code (Spark started with Hudi's bundle, a process of its own) and says so
(`executed_by`, `native_declined`), and runs tms's own code, without the bundle, where it
serves the table; Hudi's code with no bundle is refused naming `TMS_HUDI_JARS`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.crash import TMS
from tests.hudi.test_merge_config import REFUSED, v6_table
from tests.hudi.test_unsupported import listing
from tests.hudi_java.support import HUDI_1_2, fetch
from tms.cli import app, table_layer
from tms.hudi.table import HudiTable
from tms.services.compaction.plan import schedule_compaction

_, PARTIAL_UPDATE, DECLINED = REFUSED["v6-partial-update-payload"]
"""A table version 6 whose payload class (Hudi's `PartialUpdateAvroPayload`) tms's own code
does not merge by, and the words of its refusal."""


def declined_table(tmp_path: Path) -> str:
    """A merge-on-read table with log files to compact, which tms's own code declines."""
    return v6_table(tmp_path, PARTIAL_UPDATE)


def served_table(tmp_path: Path) -> str:
    return v6_table(tmp_path, {})


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["run", *args])


@pytest.fixture
def no_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Hudi bundle anywhere tms looks: neither named, nor cached, nor fetched."""
    monkeypatch.delenv("TMS_HUDI_JARS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TMS_MAVEN_CACHE", str(tmp_path / "maven"))
    monkeypatch.setenv("TMS_HUDI_CACHE", str(tmp_path / "hudi-cache"))
    monkeypatch.setenv("TMS_HUDI_FETCH", "false")


def test_native_refuses_a_table_it_declines_with_the_reason(tmp_path: Path) -> None:
    base = declined_table(tmp_path)
    before = listing(base)

    result = run("compaction", "--base-path", base, "--executor", "native")

    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and DECLINED in lines[0]
    assert listing(base) == before


def test_a_bad_executor_is_a_usage_error_naming_the_choices(tmp_path: Path) -> None:
    result = run("compaction", "--base-path", served_table(tmp_path), "--executor", "spark")

    assert result.exit_code == 2
    assert "--executor" in result.output
    assert all(f"'{choice}'" in result.output for choice in ("auto", "native", "hudi"))


@pytest.mark.usefixtures("no_bundle")
@pytest.mark.parametrize(("executor", "declined"), [("hudi", False), ("auto", True)])
def test_hudis_code_without_a_bundle_is_refused_naming_tms_hudi_jars(
    tmp_path: Path, executor: str, declined: bool
) -> None:
    base = declined_table(tmp_path) if declined else served_table(tmp_path)
    before = listing(base)

    result = run("compaction", "--base-path", base, "--executor", executor)

    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "TMS_HUDI_JARS" in lines[0] and "Hudi's Spark bundle is missing" in lines[0]
    assert (DECLINED in lines[0]) is declined
    assert listing(base) == before


@pytest.mark.spark
def test_auto_runs_native_on_a_table_it_serves_and_adopts_its_pending_plan(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_bundle_wanted() -> list[str]:
        raise AssertionError("Hudi's bundle was asked for a table native serves")

    monkeypatch.setattr(table_layer, "_hudi_bundle", no_bundle_wanted)
    base = served_table(tmp_path)
    pending = schedule_compaction(HudiTable.open(base))
    assert pending is not None
    log_file = tmp_path / "run.log"

    result = run("compaction", "--base-path", base, "--json", "--log-file", str(log_file))

    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert (figures["executed_by"], figures["native_declined"]) == ("native", None)
    assert (figures["instant"], figures["adopted_pending_plan"]) == (pending, True)
    completed = HudiTable.open(base).timeline().get(pending)
    assert completed is not None and completed.is_completed

    again = run("compaction", "--base-path", base, "--log-file", str(log_file))
    assert again.exit_code == 0, again.output
    assert "compaction: nothing to schedule" in again.stdout.splitlines()
    assert "executed_by: native" in again.stdout


@pytest.mark.spark
@pytest.mark.hudi_java
def test_auto_runs_hudis_code_on_a_table_native_declines(tmp_path: Path) -> None:
    fetch(HUDI_1_2)  # into the cache `tms run` finds it in
    base = declined_table(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "TMS_HUDI_JARS"}

    done = subprocess.run(
        [*TMS, "run", "compaction", "--base-path", base, "--master", "local[1]", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout)
    assert figures["executed_by"] == "hudi"
    assert DECLINED in figures["native_declined"]
    assert figures["adopted_pending_plan"] is False
    assert figures["file_groups"] > 0 and figures["log_files_compacted"] > 0
    assert "running Hudi's table service" in done.stderr  # the stage Hudi's code runs in
    completed = HudiTable.open(base).timeline().get(figures["instant"])
    assert completed is not None and completed.is_completed
    assert figures["records_written"] == 10  # every key `v6_table` wrote
    slices = HudiTable.open(base).file_system_view().describe()
    assert slices and not [s for s in slices if s["log_files"]]
