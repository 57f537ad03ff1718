"""Archival as a service, in tms's job protocol inside Hudi's Spark, on tables Hudi 1.2 wrote
with `hoodie.archive.automatic=false` and a metadata table: tms's dry run says what Hudi's
archiver moves and why it stops there, and Hudi's write client (`archive()`) moves exactly
that: out of the active timeline into the LSM history (version 9) or the archived log files
(version 6). Hudi's reader and hudi-rs read the table the same after it, incremental and time
travel reads into the archived range too; a savepoint's instant stays; Hudi's writer writes
on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.hudi_java.support import HUDI_1_2, HudiRelease, HudiSpark, keyed_table
from tests.hudi_java.test_hudi_writes_tms_reads import COLUMNS, SCHEMA, hudi_rs_rows
from tests.hudi_java.writer_options import SERVICES_OFF_THE_WRITER
from tms.hudi.actions import ARCHIVAL
from tms.hudi.properties import ARCHIVELOG_FOLDER
from tms.hudi.savepoints import create_savepoint, delete_savepoint
from tms.hudi.table import HudiTable
from tms.hudi.timeline.archived import ArchivedTimeline
from tms.services.archival.plan import ArchivalPlan, plan_archival

pytestmark = [pytest.mark.hudi_java, pytest.mark.spark]

Row = tuple[Any, ...]
KEEP_9 = {"keep_min": 2, "keep_max": 4}
KEEP_6 = {"keep_min": 1, "keep_max": 2}


class Table:
    """A table Hudi's writer writes without archiving, and tms's archival attempts on it."""

    def __init__(
        self, hudi: HudiSpark, path: Path, table_version: int, table_type: str, keep: dict[str, int]
    ) -> None:
        self.hudi = hudi
        self.path = path
        self.keep = keep
        self.options = {
            **keyed_table(path.name, table_type),
            **HUDI_1_2.write_options(table_version),
            **SERVICES_OFF_THE_WRITER,
            "hoodie.archive.automatic": "false",
            "hoodie.metadata.enable": "true",
            # the metadata table compacts often: archival never passes its latest compaction
            "hoodie.metadata.compact.max.delta.commits": "2",
        }
        self.model: dict[str, Row] = {}

    def write(self, operation: str, rows: list[Row]) -> None:
        options = {**self.options, "hoodie.datasource.write.operation": operation}
        self.hudi.write(self.path, rows, SCHEMA, options)
        self.model.update({row[0]: row for row in rows})

    def writes(self, count: int) -> None:
        """An insert, then upserts of one row each, `count` commits in all."""
        self.write("insert", [(f"k{i}", 1, f"p{i % 2}", float(i)) for i in range(6)])
        for n in range(1, count):
            self.write("upsert", [(f"k{n % 6}", 1 + n, f"p{n % 6 % 2}", n / 4)])

    def open(self) -> HudiTable:
        return HudiTable.open(str(self.path))

    def commits(self) -> list[str]:
        return [i.requested_time for i in self.open().timeline().commits()]

    def dry_run(self) -> ArchivalPlan:
        return plan_archival(self.open(), **self.keep)

    def archives(self) -> dict[str, Any]:
        """One `archival` attempt in tms's job protocol; the figures it reported."""
        fields = {"extra_params": {k: str(v) for k, v in self.keep.items()}}
        outcome = self.hudi.run(
            "tests.hudi_java.hudi_jobs:run_attempt", str(self.path), ARCHIVAL, fields
        )
        result = outcome["result"]
        assert outcome["code"] == 0 and result is not None, outcome
        assert result["outcome"] == "SUCCEEDED", result
        figures: dict[str, Any] = result["figures"]
        assert figures["executor"] == "hudi", figures
        assert "no archival executor" in figures["native_declined"], figures
        return figures

    def reads(self, extra: dict[str, dict[str, str]]) -> dict[str, list[Row]]:
        """The snapshot by Hudi's reader and hudi-rs, and Hudi's reads with `extra` options."""
        found = {
            "hudi": self.hudi.read(self.path, COLUMNS),
            "hudi-rs": hudi_rs_rows(str(self.path)),
        }
        for name, options in extra.items():
            found[name] = self.hudi.read(self.path, COLUMNS, options)
        return found

    def reads_right(self) -> None:
        expected = sorted(self.model.values())
        assert self.hudi.read(self.path, COLUMNS) == expected
        assert hudi_rs_rows(str(self.path)) == expected


def archived_as_planned(table: Table, plan: ArchivalPlan, figures: dict[str, Any]) -> None:
    """The active timeline lost exactly the instants the dry run named."""
    assert figures["as_planned"] is True, figures
    assert figures["instants_archived"] == len(plan.instants), figures
    timeline = table.open().timeline()
    left = {(i.requested_time, i.action) for i in timeline.instants}
    assert not {(i.requested_time, i.action) for i in plan.instants} & left
    assert table.commits()[0] == plan.earliest_kept == figures["earliest_kept"]


def test_hudis_archiver_moves_what_the_dry_run_says_on_a_version_9_table(
    hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path
) -> None:
    table = Table(hudi_spark(HUDI_1_2), tmp_path / "events_v9", 9, "MERGE_ON_READ", KEEP_9)
    table.writes(7)
    commits = table.commits()
    assert len(commits) == 7
    savepoint, _ = create_savepoint(table.open(), commits[1], user="ops")
    plan = table.dry_run()
    assert [i.requested_time for i in plan.commits] == commits[:1]
    assert plan.stopped_by == "savepoint" and plan.earliest_kept == commits[1]
    extra = {
        "incremental": {
            "hoodie.datasource.query.type": "incremental",
            "hoodie.datasource.read.begin.instanttime": commits[0],
        },
        "as of an archived commit": {"as.of.instant": commits[0]},
    }
    before = table.reads(extra)
    assert before["hudi"] == before["hudi-rs"] == sorted(table.model.values())

    figures = table.archives()
    archived_as_planned(table, plan, figures)
    history = ArchivedTimeline.load(table.open().storage, table.open().config)
    assert {i.requested_time for i in history.instants} >= set(commits[:1])
    assert table.open().timeline().get(savepoint.instant_time) is not None
    assert table.reads(extra) == before
    again = table.dry_run()
    assert not again.due and again.stopped_by == "savepoint"

    # without the savepoint, the metadata table's compaction or the compaction trigger binds
    assert delete_savepoint(table.open(), savepoint.instant_time)
    plan = table.dry_run()
    assert plan.due and plan.stopped_by in ("metadata_compaction", "compaction"), plan
    figures = table.archives()
    archived_as_planned(table, plan, figures)
    assert table.reads({}) == {k: before[k] for k in ("hudi", "hudi-rs")}

    table.write("upsert", [("k0", 50, "p0", 0.75), ("k9", 50, "p1", 9.0)])
    table.reads_right()
    assert table.open().config.table_version == 9


def test_hudis_archiver_writes_archived_log_files_on_a_version_6_table(
    hudi_spark: Callable[[HudiRelease], HudiSpark], tmp_path: Path
) -> None:
    table = Table(hudi_spark(HUDI_1_2), tmp_path / "events_v6", 6, "COPY_ON_WRITE", KEEP_6)
    table.writes(3)
    plan = table.dry_run()
    assert plan.due, plan
    before = table.reads({})

    figures = table.archives()
    archived_as_planned(table, plan, figures)
    # Hudi's archived log files, in the folder hoodie.archivelog.folder names (Hudi 1.x
    # writes `history` on the version 6 tables it creates; `archived` before 1.0)
    folder = table.path / ".hoodie" / table.open().config.get(ARCHIVELOG_FOLDER)
    assert [p.name for p in folder.iterdir() if p.name.startswith(".commits_.archive.")]
    assert table.reads({}) == before

    table.write("upsert", [("k1", 60, "p1", 1.25)])
    table.reads_right()
    assert table.open().config.table_version == 6
