"""`tms ops submit index` against a real service (API only, no Spark): the request it sends
and the refusals it prints; `tms run`'s flags as they reach the job it runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.test_operator_cli import Cli, cli_for, ok, start
from tms.cli import app, table_layer
from tms.jobs.client import JobSpec
from tms.jobs.runner import Report
from tms.planning import planning_arguments, schedule_kwargs
from tms.serve import RunningService
from tms.testing.sample_writer.new_table import create_table


@pytest.fixture
def table(tmp_path: Path) -> str:
    base = str(tmp_path / "lake" / "trips")
    create_table(base, "trips", record_key_fields=["id"], ordering_field="ts", table_version=9)
    return base


@pytest.fixture
def cli(db_url: str, tmp_path: Path, table: str) -> Iterator[Cli]:
    service: RunningService
    with start(db_url, tmp_path / "service") as service:
        invoke = cli_for(service.url)
        ok(invoke("tables", "add", table, "--name", "lake.trips"))
        yield invoke


def test_ops_submit_index_sends_the_partitions_and_drop(cli: Cli) -> None:
    submitted = json.loads(
        ok(
            cli(
                "ops", "submit", "index", "--table", "lake.trips",
                "--partitions", "record_index,column_stats", "--json",
            )
        )
    )  # fmt: skip
    assert (submitted["action"], submitted["instant"], submitted["created"]) == (
        "indexing",
        None,
        True,
    )
    assert submitted["extra_params"] == {"partitions": "record_index,column_stats"}
    again = ok(
        cli("ops", "submit", "--action", "index", "--table", "lake.trips", "--partitions",
            "column_stats,record_index")
    )  # fmt: skip
    assert again.strip() == (
        f"operation {submitted['id']}: indexing of lake.trips already submitted, SCHEDULED"
    )
    listed = json.loads(ok(cli("ops", "ls", "--action", "index", "--json")))
    assert [o["id"] for o in listed] == [submitted["id"]]

    unnamed = cli("ops", "submit", "--table", "lake.trips", "--partitions", "files")
    assert unnamed.exit_code == 2 and "name the table service" in unnamed.output
    both = cli("ops", "submit", "clean", "--action", "index", "--table", "lake.trips")
    assert both.exit_code == 2 and "two table services named" in both.output
    other = cli("ops", "submit", "index", "--table", "lake.trips", "--partitions", "files")
    assert other.exit_code == 1 and "HTTP 409" in other.stderr
    assert f"index operation {submitted['id']}" in other.stderr

    ok(cli("ops", "cancel", str(submitted["id"])))
    dropped = json.loads(
        ok(
            cli("ops", "submit", "index", "--table", "lake.trips", "--partitions",
                "record_index", "--drop", "--json")
        )
    )  # fmt: skip
    assert dropped["extra_params"] == {"partitions": "record_index", "drop": "true"}


def test_ops_submit_index_refusals(cli: Cli) -> None:
    missing = cli("ops", "submit", "index", "--table", "lake.trips")
    assert missing.exit_code == 1 and "HTTP 422" in missing.stderr
    assert "body.extra_params.partitions" in missing.stderr
    unknown = cli("ops", "submit", "index", "--table", "lake.trips", "--partitions", "blooms")
    assert unknown.exit_code == 1 and "unknown metadata partition 'blooms'" in unknown.stderr
    misplaced = cli("ops", "submit", "clean", "--table", "lake.trips", "--partitions", "files")
    assert misplaced.exit_code == 2 and "only for index" in misplaced.output
    listed = json.loads(ok(cli("ops", "ls", "--json")))
    assert listed == []


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[JobSpec]:
    """The job specs `tms run` runs; the job itself is not run: it reports what a job
    would for that spec (an index's drop what it dropped, else nothing to do)."""
    seen: list[JobSpec] = []

    def run_here(spec: JobSpec, spark: object, progress: object = None) -> Report:
        seen.append(spec)
        figures: dict[str, object] = {"executor": "native", "nothing_to_do": True}
        if spec.extra_params.get("drop"):
            figures = {"executor": "native", "dropped": ",".join(spec.extra_params["partitions"])}
        return Report("SUCCEEDED", figures=figures)

    monkeypatch.setattr(table_layer, "run_here", run_here)
    return seen


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["run", *args])
    return result.exit_code, result.output


def test_run_indexing_parses_its_flags(table: str, requests: list[JobSpec]) -> None:
    code, out = _run("indexing", "--base-path", table, "--partitions", "record_index, files")
    assert (code, out.splitlines()[0]) == (0, "indexing: nothing to schedule")
    (built,) = requests
    assert (built.action, built.instant, built.table_name) == ("indexing", None, "trips")
    assert built.extra_params == {"partitions": ["record_index", "files"], "drop": False}
    assert schedule_kwargs("indexing", built.extra_params) == {
        "partitions": ("record_index", "files"),
        "drop": False,
    }

    code, out = _run(
        "indexing", "--base-path", table, "--partitions", "column_stats", "--drop", "--json"
    )
    assert code == 0 and json.loads(out) == {
        "service": "indexing",
        "state": "DROPPED",
        "partitions": ["column_stats"],
        "executed_by": "native",
        "native_declined": None,
    }
    assert requests[1].extra_params == {"partitions": ["column_stats"], "drop": True}

    code, _ = _run("indexing", "--base-path", table, "--instant", "20250101000000001")
    assert code == 0 and requests[2].instant == "20250101000000001"


@pytest.mark.parametrize(
    ("action", "flags", "taken"),
    [
        ("compaction", ["--strategy", "log-size"], {"strategy": "log-size"}),
        (
            "clustering",
            ["--target-file-size", "1000", "--small-file-limit", "500", "--sort-columns", "a, b"],
            {"target_file_size": 1000, "small_file_limit": 500, "sort_columns": ["a", "b"]},
        ),
        (
            "clean",
            ["--policy", "keep_latest_file_versions", "--retain", "3"],
            {"policy": "KEEP_LATEST_FILE_VERSIONS", "retained": 3},
        ),
        ("metadata-compaction", [], {}),
    ],
)
def test_run_hands_its_planning_flags_to_the_job_as_its_planner_takes_them(
    table: str, requests: list[JobSpec], action: str, flags: list[str], taken: dict[str, object]
) -> None:
    """Every planning flag of `tms run` reaches the job under a name `tms.planning` reads
    for the action, and only the action's own go: the job parses them as a service's."""
    code, out = _run(action, "--base-path", table, *flags)
    assert code == 0, out
    (spec,) = requests
    parsed = schedule_kwargs(action, spec.extra_params)
    assert set(spec.extra_params) == set(parsed) <= set(planning_arguments(action))
    assert {name: parsed[name] for name in taken} == taken


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["indexing"], "indexing needs --partitions"),
        (["indexing", "--partitions", "bloom_filters"], "unknown metadata partition"),
        (["indexing", "--partitions", ","], "expected one or more of files"),
        (["indexing", "--drop", "--instant", "20250101000000001"], "--drop runs no plan"),
        (["compaction", "--partitions", "files"], "options of indexing only"),
        (["clean", "--drop"], "options of indexing only"),
    ],
)
def test_run_indexing_refuses_bad_flags(
    table: str, requests: list[JobSpec], args: list[str], message: str
) -> None:
    code, out = _run(*args, "--base-path", table)
    assert code == 2 and message in out, out
    assert requests == []


def test_ops_submit_metadata_compaction_reaches_its_route(cli: Cli) -> None:
    """Not an RFC-43 word, but operators submit it like the others."""
    submitted = json.loads(
        ok(cli("ops", "submit", "metadata-compaction", "--table", "lake.trips", "--json"))
    )
    assert (submitted["action"], submitted["created"]) == ("metadata-compaction", True)
    again = ok(cli("ops", "submit", "metadata-compaction", "--table", "lake.trips"))
    assert "already submitted" in again
