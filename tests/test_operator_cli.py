"""`tms tables …` and `tms ops …` against a real service (API only: operations stay
scheduled, no Spark) on a fresh test database."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool
from typer.testing import CliRunner, Result

from tms.cli import app
from tms.config import load_settings
from tms.hudi.table import HudiTable
from tms.serve import RunningService, free_port, serve_in_thread
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter

ADMIN = "adm-5c81e2"
VIEWER = "view-0b7d44"

Cli = Callable[..., Result]


def start(db_url: str, data_dir: Path, **overrides: Any) -> RunningService:
    settings = load_settings(
        config_file=False,
        environ={},
        database_url=db_url,
        data_dir=data_dir,
        port=free_port(),
        max_running_per_instance=0,
        pull_listings_per_minute=0,
        **overrides,
    )
    return serve_in_thread(settings)


@pytest.fixture
def service(db_url: str, tmp_path: Path) -> Iterator[RunningService]:
    with start(db_url, tmp_path / "service") as running:
        yield running


def cli_for(url: str) -> Cli:
    def invoke(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
        return CliRunner().invoke(app, [*args, "--url", url], env=env, input=stdin)

    return invoke


@pytest.fixture
def cli(service: RunningService) -> Cli:
    return cli_for(service.url)


@pytest.fixture
def trips(tmp_path: Path) -> str:
    """A merge-on-read table on storage named `trips_mor`, with one commit."""
    base = str(tmp_path / "lake" / "trips")
    table = create_table(
        base,
        "trips_mor",
        table_type="MERGE_ON_READ",
        record_key_fields=["id"],
        ordering_field="ts",
    )
    batch = pa.table({"id": ["a", "b"], "ts": pa.array([1, 1], pa.int64())})
    HudiWriter(table).insert(batch)
    return base


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def test_tables_add_ls_pause_resume_rm(cli: Cli, trips: str, db_url: str) -> None:
    added = ok(
        cli("tables", "add", trips, "--name", "lake.trips", "--compaction-delta-commits", "3")
    )
    assert added.strip() == (
        "registered lake.trips as table 1 (MERGE_ON_READ, compaction every 3 delta commits, "
        "clean every 10 commits)"
    )
    again = ok(cli("tables", "add", trips, "--name", "lake.trips"))
    assert again.startswith("already registered: lake.trips as table 1")

    listed = ok(cli("tables", "ls")).splitlines()
    assert listed[0].split() == [
        "ID", "TABLE", "TYPE", "QUEUE", "PRIO", "STATE", "LAST", "COMMIT", "DELTAS", "LOG",
        "DELTAS", "COMMITS", "MDT", "DELTAS", "BASE", "PATH",
    ]  # fmt: skip
    assert listed[1].split() == ["1", "lake.trips", "MOR", "default", "0", "active", "-", "0",
                                 "0", "0", "0", trips]  # fmt: skip
    counters = (
        "UPDATE tbl SET delta_commits_since_compaction = 7, "
        "delta_commits_since_log_compaction = 3, commits_since_clean = 5, "
        "commits_since_metadata_compaction = 9"
    )
    engine = create_engine(db_url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text(counters))
    finally:
        engine.dispose()
    row = ok(cli("tables", "ls")).splitlines()[1].split()
    assert row[7:11] == ["7", "3", "5", "9"]  # DELTAS, LOG DELTAS, COMMITS, MDT DELTAS
    shown = json.loads(ok(cli("tables", "ls", "--json")))
    assert [(t["db_name"], t["table_name"], t["policy"]) for t in shown] == [
        ("lake", "trips", {"compaction_delta_commits": 3})
    ]

    assert ok(cli("tables", "pause", "lake.trips")).strip() == (
        "lake.trips (table 1) paused: no new operations by policy"
    )
    assert "lake.trips" in ok(cli("tables", "ls", "--paused"))
    assert ok(cli("tables", "ls", "--active")).strip() == "no tables"
    assert json.loads(ok(cli("tables", "resume", "1", "--json")))["paused"] is False

    refused = cli("tables", "rm", "1", stdin="n\n")
    assert refused.exit_code == 1 and "Forget lake.trips (table 1)" in refused.output
    assert ok(cli("tables", "rm", "lake.trips", "--yes")).strip() == "removed lake.trips (table 1)"
    assert ok(cli("tables", "ls")).strip() == "no tables"


def test_tables_add_refuses_other_settings_for_a_registered_table(cli: Cli, trips: str) -> None:
    """Registering again changes nothing, so flags that differ from what is registered are
    refused (exit 1), naming the command that changes them; the same flags are fine."""
    add = ("tables", "add", trips, "--name", "lake.trips")
    ok(cli(*add, "--compaction-delta-commits", "3", "--actions", "compaction,clean"))

    refused = cli(*add, "--compaction-delta-commits", "2")
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr == (
        "error: lake.trips is already registered (table 1) with --compaction-delta-commits 3 "
        "(not 2); registering again changes nothing: change it with "
        "tms tables set lake.trips --compaction-delta-commits 2\n"
    )
    paused = cli(*add, "--paused", "--queue", "etl")
    assert paused.exit_code == 1
    assert paused.stderr.endswith(
        "with --queue default (not etl), --paused active (not paused); registering again "
        "changes nothing: change it with tms tables set lake.trips --queue etl and "
        "tms tables pause lake.trips\n"
    )
    [table] = json.loads(ok(cli("tables", "ls", "--json")))
    assert (table["policy"], table["queue"], table["paused"]) == (
        {"compaction_delta_commits": 3},
        "default",
        False,
    )

    # the same settings (actions in another order, by their alias) are a repeat: exit 0
    again = ok(cli(*add, "--compaction-delta-commits", "3", "--actions", "clean,compact"))
    assert again.startswith("already registered: lake.trips as table 1")

    changed = ok(cli("tables", "set", "lake.trips", "--compaction-delta-commits", "2"))
    assert changed.strip() == (
        "lake.trips (table 1) changed: MERGE_ON_READ, compaction every 2 delta commits, "
        "clean every 10 commits, queue default, priority 0, actions compaction,clean"
    )
    [table] = json.loads(ok(cli("tables", "ls", "--json")))
    assert table["policy"] == {"compaction_delta_commits": 2}
    assert ok(cli(*add, "--compaction-delta-commits", "2")).startswith("already registered:")


def test_tables_set_keeps_the_other_policy_overrides(cli: Cli, trips: str) -> None:
    ok(cli("tables", "add", trips, "--name", "lake.trips", "--clean-commits", "4"))
    ok(cli("tables", "set", "1", "--compaction-delta-commits", "5", "--priority", "7"))
    table = json.loads(ok(cli("tables", "set", "lake.trips", "--queue", "etl", "--json")))
    assert table["policy"] == {"clean_commits": 4, "compaction_delta_commits": 5}
    assert (table["queue"], table["priority"]) == ("etl", 7)
    nothing = cli("tables", "set", "lake.trips")
    assert nothing.exit_code == 2 and nothing.stderr.startswith("error: nothing to change")


def test_log_compaction_is_enabled_and_its_threshold_set_from_the_cli(cli: Cli, trips: str) -> None:
    added = json.loads(
        ok(
            cli(
                "tables", "add", trips, "--name", "lake.trips", "--actions",
                "compaction,logcompaction", "--log-compaction-delta-commits", "2", "--json",
            )
        )
    )  # fmt: skip
    assert added["enabled_actions"] == ["compaction", "logcompaction"]
    assert added["thresholds"]["log_compaction_delta_commits"] == 2
    changed = json.loads(
        ok(cli("tables", "set", "lake.trips", "--log-compaction-delta-commits", "6", "--json"))
    )
    assert changed["policy"] == {"log_compaction_delta_commits": 6}
    refused = cli(
        "tables", "add", trips, "--name", "lake.trips", "--log-compaction-delta-commits", "3"
    )
    assert refused.exit_code == 1
    assert "--log-compaction-delta-commits 6 (not 3)" in refused.stderr


def test_tables_add_takes_the_name_from_storage(cli: Cli, trips: str) -> None:
    table = json.loads(ok(cli("tables", "add", trips, "--paused", "--json")))
    assert (table["db_name"], table["table_name"], table["paused"]) == (
        "default",
        "trips_mor",
        True,
    )
    assert table["created"] is True


def test_ops_submit_ls_show_cancel_retry(cli: Cli, trips: str) -> None:
    ok(cli("tables", "add", trips, "--name", "lake.trips"))
    first = ok(cli("ops", "submit", "compaction", "--table", "lake.trips"))
    assert first.strip() == "operation 1: compaction of lake.trips submitted, SCHEDULED"
    again = ok(cli("ops", "submit", "compaction", "--table", "1"))
    assert again.strip() == "operation 1: compaction of lake.trips already submitted, SCHEDULED"
    clean = json.loads(
        ok(
            cli(
                "ops", "submit", "clean", "--table", "lake.trips", "--priority", "5",
                "--param", "hoodie.cleaner.commits.retained=2", "--max-retries", "1", "--json",
            )
        )
    )  # fmt: skip
    assert clean["extra_params"] == {"hoodie.cleaner.commits.retained": "2"}
    assert (clean["priority"], clean["max_retries"], clean["created"]) == (5, 1, True)
    cid = clean["id"]  # ids come from a sequence: a repeated submit may use one up

    rows = ok(cli("ops", "ls")).splitlines()
    assert rows[0].split() == ["ID", "TABLE", "ACTION", "INSTANT", "STATUS", "EXECUTOR", "RUNS",
                               "UPDATED", "ERROR"]  # fmt: skip
    assert [r.split()[:7] for r in rows[1:]] == [
        [str(cid), "lake.trips", "clean", "-", "SCHEDULED", "auto", "0/2"],
        ["1", "lake.trips", "compaction", "-", "SCHEDULED", "auto", "0/4"],
    ]
    only_clean = json.loads(ok(cli("ops", "ls", "--action", "clean", "--status", "SCHEDULED",
                                   "--table", "lake.trips", "--json")))  # fmt: skip
    assert [o["id"] for o in only_clean] == [cid]

    shown = ok(cli("ops", "show", str(cid)))
    assert "extra params: hoodie.cleaner.commits.retained=2" in shown
    assert "instant: planned by its job" in shown
    assert "\nHistory\n" in shown and "SCHEDULED" in shown
    assert shown.rstrip().endswith("Attempts\nnone yet")

    assert ok(cli("ops", "cancel", "1")).strip() == "operation 1: CANCELLED"
    assert ok(cli("ops", "cancel", "1")).strip() == "operation 1: CANCELLED"  # a no-op
    retried = ok(cli("ops", "retry", "1")).strip()
    assert retried.startswith("operation 1 stays cancelled; its retry is operation ")
    new_id = int(retried.split("its retry is operation ")[1].split(":")[0])
    assert retried.endswith(f"{new_id}: SCHEDULED, due now") and new_id not in (1, cid)
    detail = json.loads(ok(cli("ops", "show", "1", "--json")))
    assert detail["attempts"] == []
    statuses = [e["to_status"] for e in detail["operation"]["events"]]
    assert statuses == ["SCHEDULED", "CANCELLED"]
    cancelled = ok(cli("ops", "ls", "--status", "CANCELLED")).splitlines()[1:]
    assert [row.split()[0] for row in cancelled] == ["1"]


def _run_as_worker(service: RunningService, figures: dict[str, Any]) -> None:
    """What a resident worker's job does: claim the due attempt, report its result."""
    worker = {
        "id": "w-1",
        "host": "h",
        "pid": 1,
        "spark_master": "local[1]",
        "queues": ["default"],
        "slots": 1,
    }
    assert httpx.post(f"{service.url}/v1/workers", json=worker).status_code == 201
    claim = {"free": 1, "busy": 0, "wait_seconds": 1, "log_dir": str(service.settings.data_dir)}
    (attempt,) = httpx.post(f"{service.url}/v1/workers/w-1/claim", json=claim).json()["attempts"]
    result = httpx.post(
        f"{service.url}/v1/jobs/attempts/{attempt['attempt_id']}/result",
        json={"outcome": "SUCCEEDED", "figures": figures},
        headers={"Authorization": f"Bearer {attempt['token']}"},
    )
    assert result.status_code == 200, result.text


def test_ops_executor_asked_run_and_declined(cli: Cli, service: RunningService, trips: str) -> None:
    ok(cli("tables", "add", trips, "--name", "lake.trips"))
    bad = cli("ops", "submit", "clean", "--table", "lake.trips", "--executor", "spark")
    assert bad.exit_code == 2 and "auto, native, hudi" in bad.output
    assert json.loads(ok(cli("tables", "set", "lake.trips", "--executor", "Native", "--json")))[
        "policy"
    ] == {"executor": "native"}
    by_policy = json.loads(ok(cli("ops", "submit", "compaction", "--table", "1", "--json")))
    assert by_policy["executor"] == "native"
    asked = ok(cli("ops", "submit", "clean", "--table", "1", "--executor", "auto", "--json"))
    clean = json.loads(asked)
    assert clean["executor"] == "auto"
    ok(cli("ops", "cancel", str(by_policy["id"])))

    declined = "CUSTOM merge mode: the native compaction cannot merge its records"
    _run_as_worker(service, {"executor": "hudi", "native_declined": declined})
    rows = [r.split()[:6] for r in ok(cli("ops", "ls")).splitlines()[1:]]
    assert rows[0] == [str(clean["id"]), "lake.trips", "clean", "-", "COMPLETED", "hudi"]
    assert ok(cli("ops", "ls")).splitlines()[1].split()[6] == "(auto)"
    assert rows[1][5] == "native"  # asked by the policy, no job reported
    shown = ok(cli("ops", "show", str(clean["id"])))
    assert "executor: hudi (auto)" in shown
    assert f"native declined: {declined}" in shown
    detail = json.loads(ok(cli("ops", "show", str(clean["id"]), "--json")))["operation"]
    assert (detail["executor"], detail["executed_by"], detail["native_declined"]) == (
        "auto",
        "hudi",
        declined,
    )


def test_errors_are_one_line_with_exit_codes(cli: Cli, trips: str) -> None:
    missing = cli("ops", "show", "999")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: ") and "(HTTP 404 not_found)" in missing.stderr
    assert missing.stderr.count("\n") == 1

    ok(cli("tables", "add", trips, "--name", "lake.trips"))
    submitted = json.loads(ok(cli("ops", "submit", "clean", "--table", "lake.trips", "--json")))
    refused = cli("ops", "retry", str(submitted["id"]))
    assert refused.exit_code == 1 and "HTTP 409" in refused.stderr

    unknown = cli("tables", "pause", "lake.nope")
    assert (unknown.exit_code, unknown.stderr) == (1, "error: no table lake.nope is registered\n")

    bad = cli("ops", "submit", "compaction", "--table", "1", "--resource", "lots")
    assert bad.exit_code == 1 and "resource" in bad.stderr and "HTTP 422" in bad.stderr

    usage = cli("ops", "submit", "clean", "--table", "1", "--param", "nokey")
    assert usage.exit_code == 2 and "key=value" in usage.output


def test_unreachable_service_exits_2_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = cli_for(url)("tables", "ls")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: cannot reach the tms service at {url}: ")
    assert result.stderr.count("\n") == 1


def test_tokens_from_the_option_or_tms_token(db_url: str, tmp_path: Path, trips: str) -> None:
    tokens = f"admin:{ADMIN},viewer:{VIEWER}"
    with start(db_url, tmp_path / "auth", auth_tokens=tokens) as secured:
        cli = cli_for(secured.url)
        anonymous = cli("tables", "ls")
        assert anonymous.exit_code == 1 and "HTTP 401" in anonymous.stderr
        assert ok(cli("tables", "ls", env={"TMS_TOKEN": VIEWER})).strip() == "no tables"
        forbidden = cli("tables", "add", trips, env={"TMS_TOKEN": VIEWER})
        assert forbidden.exit_code == 1 and "HTTP 403" in forbidden.stderr
        assert ok(cli("tables", "add", trips, "--token", ADMIN)).startswith("registered")


def test_workers_ls_shows_the_registered_workers(cli: Cli, service: RunningService) -> None:
    assert ok(cli("workers", "ls")).strip() == "no workers"
    worker = {
        "id": "host-7-cafe",
        "host": "host",
        "pid": 7,
        "spark_master": "local[2]",
        "queues": ["default", "etl"],
        "slots": 3,
    }
    assert httpx.post(f"{service.url}/v1/workers", json=worker).status_code == 201
    listed = ok(cli("workers", "ls")).splitlines()
    assert listed[0].split()[:6] == ["ID", "HOST", "MASTER", "QUEUES", "SLOTS", "BUSY"]
    assert listed[1].split()[:8] == [
        "host-7-cafe",
        "host",
        "local[2]",
        "default,etl",
        "3",
        "0",
        "0",
        "alive",
    ]
    assert json.loads(ok(cli("workers", "ls", "--json")))[0]["slots"] == 3


def test_savepoints_create_ls_rm(cli: Cli, trips: str) -> None:
    ok(cli("tables", "add", trips, "--name", "lake.trips"))
    commit = HudiTable.open(trips).timeline().completed()[0].requested_time
    assert ok(cli("savepoints", "ls", "lake.trips")).strip() == "no savepoints on lake.trips"

    made = ok(cli("savepoints", "create", "lake.trips", commit, "--comment", "before backfill"))
    assert made.strip() == (
        f"savepoint {commit} on lake.trips made: it keeps 1 files from the cleaner"
    )
    again = ok(cli("savepoints", "create", "lake.trips", commit))
    assert again.strip().startswith(f"savepoint {commit} on lake.trips stood already")
    listed = json.loads(ok(cli("savepoints", "ls", "lake.trips", "--json")))
    assert [(s["instant"], s["comment"], s["files"]) for s in listed] == [
        (commit, "before backfill", 1)
    ]
    table = ok(cli("savepoints", "ls", "1"))
    assert commit in table and "before backfill" in table

    refused = cli("savepoints", "create", "lake.trips", "20200101000000000")
    assert refused.exit_code == 1 and "not a completed commit" in refused.output
    bad = cli("savepoints", "create", "lake.trips", "yesterday")
    assert bad.exit_code == 1 and "instant" in bad.output

    assert cli("savepoints", "rm", "lake.trips", commit).exit_code == 1  # not confirmed
    assert ok(cli("savepoints", "rm", "lake.trips", commit, "--yes")).strip() == (
        f"removed savepoint {commit} of lake.trips"
    )
    gone = cli("savepoints", "rm", "lake.trips", commit, "--yes")
    assert gone.exit_code == 1 and "has no savepoint" in gone.output
