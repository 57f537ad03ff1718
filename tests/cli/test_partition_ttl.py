"""Partition TTL on the command line: `tms run partition_ttl`'s flags as they reach the job
(`--ttl-days`, `--partitions` as glob patterns) and its refusals, and `tms ttl dry-run`
against a real service (API only, no Spark) on a table whose partitions were written in 2020
but one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.services.test_clean import batch, new_table
from tests.services.test_partition_ttl import Clock, frozen_clock
from tests.test_operator_cli import Cli, cli_for, ok, start
from tms.cli import app, table_layer
from tms.hudi.properties import MERGE_ON_READ
from tms.jobs.client import JobSpec
from tms.jobs.runner import Report
from tms.planning import schedule_kwargs
from tms.serve import RunningService


@pytest.fixture
def aged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """sf, nyc and la written on 2020-01-01; la written again now."""
    with monkeypatch.context() as patched:
        frozen_clock(patched, Clock.at("2020-01-01"))
        base, writer = new_table(tmp_path / "lake", MERGE_ON_READ, table_version=9)
        writer.insert(batch(range(30), ts=1))
    writer.insert(batch(range(32, 40, 3), ts=2))
    return base


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[JobSpec]:
    """The job specs `tms run` runs; the job itself is not run: it finds nothing to do."""
    seen: list[JobSpec] = []

    def run_here(spec: JobSpec, spark: object, progress: object = None) -> Report:
        seen.append(spec)
        return Report("SUCCEEDED", figures={"executor": "hudi", "nothing_to_do": True})

    monkeypatch.setattr(table_layer, "run_here", run_here)
    return seen


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["run", *args])
    return result.exit_code, result.output


def test_run_partition_ttl_hands_its_flags_to_the_job(aged: str, requests: list[JobSpec]) -> None:
    code, out = _run(
        "partition_ttl", "--base-path", aged, "--ttl-days", "30", "--partitions", "s*, n?c"
    )
    assert (code, out.splitlines()[0]) == (0, "partition_ttl: nothing to schedule"), out
    (spec,) = requests
    assert spec.action == "partition_ttl"
    assert spec.extra_params == {"ttl_days": 30, "ttl_partitions": ["s*", "n?c"]}
    assert schedule_kwargs("partition_ttl", spec.extra_params) == {
        "ttl_days": 30,
        "ttl_partitions": ("s*", "n?c"),
    }
    code, _ = _run("partition_ttl", "--base-path", aged, "--instant", "20250101000000001")
    assert code == 0 and requests[1].instant == "20250101000000001"
    assert requests[1].extra_params == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["partition_ttl"], "partition_ttl needs --ttl-days"),
        (["partition_ttl", "--ttl-days", "0"], "--ttl-days"),
        (["compaction", "--ttl-days", "3"], "--ttl-days is an option of partition_ttl only"),
        (["clean", "--partitions", "s*"], "options of indexing only"),
    ],
)
def test_run_partition_ttl_refuses_bad_flags(
    aged: str,
    requests: list[JobSpec],
    args: list[str],
    message: str,
) -> None:
    code, out = _run(*args, "--base-path", aged)
    assert code == 2 and message in out, out
    assert requests == []


@pytest.fixture
def cli(db_url: str, tmp_path: Path, aged: str) -> Iterator[Cli]:
    service: RunningService
    with start(db_url, tmp_path / "service") as service:
        invoke = cli_for(service.url)
        ok(invoke("tables", "add", aged, "--name", "lake.trips"))
        yield invoke


def test_ttl_dry_run_prints_what_would_go_and_why(cli: Cli) -> None:
    lines = ok(cli("ttl", "dry-run", "lake.trips", "--days", "30")).splitlines()
    assert lines[0].startswith("partition TTL of 30 days on lake.trips as of ")
    assert lines[0].endswith(": would delete 2 partitions, keep 1")
    assert lines[1].split() == ["PARTITION", "LAST", "COMMIT", "REASON"]
    rows = [line.split(maxsplit=2) for line in lines[2:]]
    assert [(r[0], r[2]) for r in rows] == [
        ("nyc", "expired"),
        ("sf", "expired"),
        ("la", "last commit within 30 days"),
    ]
    chosen = json.loads(
        ok(cli("ttl", "dry-run", "lake.trips", "--days", "30", "--partitions", "sf", "--json"))
    )
    assert [v["partition"] for v in chosen["expired"]] == ["sf"] and chosen["not_selected"] == 2

    refused = cli("ttl", "dry-run", "lake.trips", "--days", "0")
    assert refused.exit_code == 2 and "--days" in refused.output
    unknown = cli("ttl", "dry-run", "lake.nothing", "--days", "3")
    assert unknown.exit_code == 1 and "no table lake.nothing is registered" in unknown.stderr
