"""Archival on the command line: `tms run archival`'s `--keep-min`/`--keep-max` as they reach
the job, and `tms archival dry-run` against a real service (API only, no Spark) on a
copy-on-write table of six commits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.services.test_clean import batch, new_table
from tests.test_operator_cli import Cli, cli_for, ok, start
from tms.cli import app, table_layer
from tms.hudi.properties import COPY_ON_WRITE
from tms.hudi.table import HudiTable
from tms.jobs.client import JobSpec
from tms.jobs.runner import Report
from tms.serve import RunningService


@pytest.fixture
def written(tmp_path: Path) -> str:
    base, writer = new_table(tmp_path / "lake", COPY_ON_WRITE, table_version=9)
    writer.insert(batch(range(20), ts=1))
    for ts in range(2, 7):
        writer.upsert(batch(range(0, 20, 4), ts=ts))
    return base


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[JobSpec]:
    """The job specs `tms run` runs; the job itself is not run: it finds nothing due."""
    seen: list[JobSpec] = []

    def run_here(spec: JobSpec, spark: object, progress: object = None) -> Report:
        seen.append(spec)
        figures = {"executor": "hudi", "nothing_to_do": True, "reason": "6 completed commits"}
        return Report("SUCCEEDED", figures=figures)

    monkeypatch.setattr(table_layer, "run_here", run_here)
    return seen


def test_run_archival_hands_its_keep_settings_to_the_job(
    written: str, requests: list[JobSpec]
) -> None:
    result = CliRunner().invoke(
        app, ["run", "archival", "--base-path", written, "--keep-min", "2", "--keep-max", "4"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "archival: nothing to do: 6 completed commits"
    (spec,) = requests
    assert spec.action == "archival" and spec.extra_params == {"keep_min": 2, "keep_max": 4}
    bare = CliRunner().invoke(app, ["run", "archival", "--base-path", written])
    assert bare.exit_code == 0 and requests[1].extra_params == {}
    zero = CliRunner().invoke(app, ["run", "archival", "--base-path", written, "--keep-min", "0"])
    assert zero.exit_code == 2 and "--keep-min" in zero.output and len(requests) == 2


@pytest.fixture
def cli(db_url: str, tmp_path: Path, written: str) -> Iterator[Cli]:
    service: RunningService
    with start(db_url, tmp_path / "service") as service:
        invoke = cli_for(service.url)
        ok(invoke("tables", "add", written, "--name", "lake.trips"))
        yield invoke


def test_archival_dry_run_prints_what_would_go_and_why(cli: Cli, written: str) -> None:
    commits = [i.requested_time for i in HudiTable.open(written).timeline().commits()]
    nothing = ok(cli("archival", "dry-run", "lake.trips")).strip()
    assert nothing.startswith("nothing to archive on lake.trips (keep.min 20, keep.max 30): ")
    assert "6 completed commits" in nothing

    lines = ok(cli("archival", "dry-run", "lake.trips", "--keep-min", "2", "--keep-max", "4"))
    first, header, *rows = lines.splitlines()
    assert first == (
        "archival of lake.trips would archive 4 instants (4 commits of 6; keep.min 2, "
        f"keep.max 4), keeping from {commits[4]}: Hudi keeps the latest 2 completed commits "
        "(hoodie.keep.min.commits)"
    )
    assert header.split() == ["INSTANT", "ACTION", "COMPLETION_TIME"]
    assert [row.split()[0] for row in rows] == commits[:4]
    plan = json.loads(
        ok(cli("archival", "dry-run", "1", "--keep-max", "4", "--keep-min", "2", "--json"))
    )
    assert plan["stopped_by"] == "keep_min" and plan["earliest_kept"] == commits[4]

    refused = cli("archival", "dry-run", "lake.trips", "--keep-min", "4", "--keep-max", "4")
    assert refused.exit_code == 1 and "keep_max" in refused.output
    unknown = cli("archival", "dry-run", "lake.nothing")
    assert unknown.exit_code == 1 and "no table lake.nothing is registered" in unknown.stderr
