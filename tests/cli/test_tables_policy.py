"""`tms tables add/set`'s archival and partition TTL policy flags, against a real service
(API only, no Spark) on a fresh test database."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_operator_cli import Cli, cli_for, ok, start
from tms.testing.sample_writer.new_table import create_table


@pytest.fixture
def cli(db_url: str, tmp_path: Path) -> Iterator[Cli]:
    with start(db_url, tmp_path / "service") as running:
        yield cli_for(running.url)


@pytest.fixture
def events(tmp_path: Path) -> str:
    """A copy-on-write table on storage named `events`, without commits."""
    base = str(tmp_path / "lake" / "events")
    create_table(
        base, "events", table_type="COPY_ON_WRITE", record_key_fields=["id"], ordering_field="ts"
    )
    return base


def test_the_archival_policy_is_set_from_the_cli(cli: Cli, events: str) -> None:
    added = json.loads(
        ok(
            cli(
                "tables", "add", events, "--name", "lake.events", "--actions", "clean,archival",
                "--archival-keep-min", "4", "--archival-keep-max", "6", "--json",
            )
        )
    )  # fmt: skip
    assert added["enabled_actions"] == ["clean", "archival"]
    assert added["policy"] == {"archival_keep_min": 4, "archival_keep_max": 6}
    assert added["thresholds"]["archival_commits"] == 3
    changed = json.loads(
        ok(cli("tables", "set", "lake.events", "--archival-commits", "8", "--json"))
    )
    assert changed["policy"] == {
        "archival_keep_min": 4,
        "archival_keep_max": 6,
        "archival_commits": 8,
    }
    assert changed["thresholds"]["archival_commits"] == 8
    refused = cli("tables", "set", "lake.events", "--archival-keep-max", "3")
    assert refused.exit_code == 1
    assert "archival_keep_max must be greater than archival_keep_min" in refused.stderr
    again = cli(
        "tables", "add", events, "--name", "lake.events", "--archival-keep-min", "5",
        "--archival-commits", "8",
    )  # fmt: skip
    assert again.exit_code == 1
    assert "--archival-keep-min 4 (not 5)" in again.stderr
    assert "--archival-commits" not in again.stderr  # the same as registered
    assert "tms tables set lake.events --archival-keep-min 5" in again.stderr


def test_the_partition_ttl_policy_is_set_from_the_cli(cli: Cli, events: str) -> None:
    add = ("tables", "add", events, "--name", "lake.events")
    added = ok(
        cli(
            *add, "--actions", "clean,partition_ttl", "--ttl-days", "90",
            "--ttl-partitions", "dt=2025-*, region=eu/*,dt=2025-*",
        )
    )  # fmt: skip
    assert added.strip() == (
        "registered lake.events as table 1 (COPY_ON_WRITE, compaction every 5 delta commits, "
        "clean every 10 commits, partition TTL 90 days every 24 hours)"
    )
    [table] = json.loads(ok(cli("tables", "ls", "--json")))
    assert table["policy"] == {"ttl_days": 90, "ttl_partitions": ["dt=2025-*", "region=eu/*"]}
    assert table["thresholds"]["ttl_interval_hours"] == 24
    changed = json.loads(
        ok(
            cli(
                "tables", "set", "lake.events", "--ttl-max-partitions", "5",
                "--ttl-interval-hours", "6", "--json",
            )
        )
    )  # fmt: skip
    assert changed["policy"] == {
        "ttl_days": 90,
        "ttl_partitions": ["dt=2025-*", "region=eu/*"],
        "ttl_max_partitions": 5,
        "ttl_interval_hours": 6,
    }
    assert changed["thresholds"]["ttl_interval_hours"] == 6
    shown = ok(cli("tables", "set", "lake.events", "--actions", "clean"))
    assert "partition TTL 90 days every 6 hours (partition_ttl not enabled)" in shown

    assert ok(cli(*add, "--ttl-days", "90", "--ttl-interval-hours", "6")).startswith(
        "already registered:"
    )
    again = cli(*add, "--ttl-days", "30", "--ttl-partitions", "dt=2024-*")
    assert again.exit_code == 1
    assert "--ttl-days 90 (not 30), --ttl-partitions dt=2025-*,region=eu/* (not dt=2024-*)" in (
        again.stderr
    )
    assert "tms tables set lake.events --ttl-days 30 --ttl-partitions 'dt=2024-*'" in again.stderr


def test_the_partition_ttl_flags_are_checked(cli: Cli, events: str) -> None:
    add = ("tables", "add", events, "--name", "lake.events")
    without_days = cli(*add, "--ttl-interval-hours", "6")
    assert without_days.exit_code == 1
    assert "ttl_interval_hours need ttl_days" in without_days.stderr
    for flags in (
        ("--ttl-days", "0"),
        ("--ttl-days", "36501"),
        ("--ttl-max-partitions", "0"),
        ("--ttl-interval-hours", "-1"),
    ):
        assert cli(*add, *flags).exit_code == 2, flags
    blank = cli(*add, "--ttl-days", "7", "--ttl-partitions", " , ")
    assert blank.exit_code == 2
    assert "--ttl-partitions: give one or more glob patterns" in blank.stderr
    assert json.loads(ok(cli("tables", "ls", "--json"))) == []
