"""The pull fallback: tables whose writers do not notify are read from storage.

The sweep's rate is counted with a clock the test moves (never timed); the reads of real
tables use the project's writer's merge-on-read tables of versions 6 and 9, written without
any notification, and compare what the pull records with what notifications would have.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import select, text, update
from sqlalchemy.orm import Session, sessionmaker

from tms.application import OperationManager
from tms.config import Settings, load_settings
from tms.ingest.pulled import PulledCommit, PulledTimeline
from tms.scheduler.pull import Pacer, PullSweep
from tms.store import (
    Commit,
    Operation,
    PullTarget,
    ServiceAction,
    Tbl,
    claim_pulls,
    get_table,
    list_commits,
    register_table,
    session_scope,
)
from tms.testing.sample_writer.new_table import create_table
from tms.testing.sample_writer.writer import HudiWriter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class CountingReader:
    """Stands in for storage in the rate tests: counts the listings, finds no commits."""

    listed: list[tuple[float, int]] = field(default_factory=list)
    clock: Clock | None = None

    def timeline(self, target: PullTarget) -> PulledTimeline:
        self.listed.append((self.clock() if self.clock else 0.0, target.tbl_id))
        return PulledTimeline(timeline=None)  # type: ignore[arg-type]

    def new_commits(self, pulled: PulledTimeline, known: Collection[str]) -> list[PulledCommit]:
        return []


def pull_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "pull_listings_per_minute": 120,
        "notification_timeout_seconds": 3600,
        "pull_sweep_interval_seconds": 3600,
        "scheduler_interval_seconds": 1.0,
    }
    values.update(overrides)
    return load_settings(config_file=False, environ={}, **values)


def add_tables(session: Session, count: int) -> None:
    session.execute(
        text(
            "INSERT INTO tbl (db_name, table_name, base_path) "
            "SELECT 'db', 't' || g, '/lake/t' || g FROM generate_series(1, :n) g"
        ),
        {"n": count},
    )


# The pacer ------------------------------------------------------------------------------


def test_the_pacer_gives_its_rate_each_minute_and_saves_up_no_more_than_its_burst() -> None:
    clock = Clock()
    pacer = Pacer(120, clock, burst=2)
    per_second = []
    for _ in range(120):
        per_second.append(pacer.take(100))
        clock.now += 1.0
    assert sum(per_second[:60]) == sum(per_second[60:]) == 120
    assert max(per_second) == 2
    clock.now += 600  # idle for ten minutes: nothing saved beyond the burst
    assert pacer.take(100) == 2
    assert pacer.take(100) == 0


def test_the_pacer_lets_unused_slots_lapse_and_is_off_at_zero() -> None:
    clock = Clock()
    pacer = Pacer(60, clock, burst=5)
    clock.now += 10
    assert pacer.take(100) == 5
    pacer.lapse(5)  # nothing was due: the five are not kept, one is due now
    assert pacer.take(100) == 1
    assert pacer.take(100) == 0
    clock.now += 1
    assert pacer.take(100) == 1
    assert Pacer(0, clock).take(100) == 0


# The sweep over many tables ----------------------------------------------------------


def test_the_sweep_lists_a_thousand_tables_at_its_rate_each_once(
    factory: sessionmaker[Session],
) -> None:
    with session_scope(factory) as session:
        add_tables(session, 1000)
    clock = Clock()
    reader = CountingReader(clock=clock)
    sweep = PullSweep(factory, OperationManager(pull_settings()), "i1", reader=reader, clock=clock)
    minutes = 9  # 9 × 120 = 1,080 listings' worth: all 1,000 tables, then nothing is due
    for _ in range(minutes * 60):
        sweep.run()
        clock.now += 1.0
    per_minute = [0] * minutes
    for at, _ in reader.listed:
        per_minute[int((at - 1000.0) // 60)] += 1
    assert per_minute[:8] == [120] * 8  # the setting, minute after minute
    assert per_minute[8] == 40  # the rest: each table once, none again
    tables = [tbl_id for _, tbl_id in reader.listed]
    assert len(tables) == len(set(tables)) == 1000
    with session_scope(factory) as session:
        assert session.scalar(select(Tbl.id).where(Tbl.last_pulled_at.is_(None))) is None
        assert session.scalar(select(Tbl.id).where(Tbl.pull_lease_owner.is_not(None))) is None


def test_silent_tables_come_first_and_a_table_is_leased_to_one_instance(
    session: Session,
) -> None:
    now = datetime.now(UTC)
    quiet = register_table(session, db_name="db", table_name="quiet", base_path="/lake/q").table
    spoke = register_table(session, db_name="db", table_name="spoke", base_path="/lake/s").table
    fresh = register_table(session, db_name="db", table_name="fresh", base_path="/lake/f").table
    session.execute(
        update(Tbl).where(Tbl.id.in_([spoke.id, fresh.id])).values(last_notification_at=now)
    )
    session.execute(update(Tbl).where(Tbl.id == fresh.id).values(last_pulled_at=now))
    session.commit()
    limits = {"lease_seconds": 60, "timeout_seconds": 600, "sweep_seconds": 3600}

    first = claim_pulls(session, "i1", limit=1, **limits)
    assert [(t.tbl_id, t.silent) for t in first] == [(quiet.id, True)]
    # i1 holds `quiet`: i2 gets the sweep's turn, and `fresh` is due for neither
    second = claim_pulls(session, "i2", limit=5, **limits)
    assert [(t.tbl_id, t.silent) for t in second] == [(spoke.id, False)]
    # once the leases expire, the tables are free again
    later = now + timedelta(seconds=61)
    again = claim_pulls(session, "i3", limit=5, now=later, **limits)
    assert sorted(t.tbl_id for t in again) == sorted([quiet.id, spoke.id])


def test_a_per_table_timeout_overrides_the_setting_and_zero_turns_pulls_off(
    session: Session,
) -> None:
    now = datetime.now(UTC)
    fast = register_table(
        session,
        db_name="db",
        table_name="fast",
        base_path="/lake/fast",
        policy={"notification_timeout_seconds": 60},
    ).table
    off = register_table(
        session,
        db_name="db",
        table_name="off",
        base_path="/lake/off",
        policy={"notification_timeout_seconds": 0},
    ).table
    session.execute(
        update(Tbl)
        .where(Tbl.id.in_([fast.id, off.id]))
        .values(last_notification_at=now - timedelta(seconds=120))
    )
    session.commit()
    claimed = claim_pulls(
        session, "i1", limit=5, lease_seconds=60, timeout_seconds=3600, sweep_seconds=0
    )
    assert [(t.tbl_id, t.silent) for t in claimed] == [(fast.id, True)]


def test_a_failing_storage_read_ends_the_lease_and_the_table_waits_its_turn(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    writer = quiet_table(tmp_path, 9)
    writer.insert(trips(range(10), ts=1))
    with session_scope(factory) as session:
        gone = register_table(
            session, db_name="db", table_name="gone", base_path="/nonexistent/gone"
        ).table
        fine = register_table(
            session, db_name="db", table_name="fine", base_path=writer.table.base_path
        ).table
    sweep = PullSweep(factory, OperationManager(pull_settings()), "i1", clock=Clock())
    report = sweep.run()  # one round: both tables, one transaction for what was read
    assert report.failed == [gone.id]
    assert report.pulled == [fine.id] and report.new_commits == {fine.id: 1}
    with session_scope(factory) as session:
        row = get_table(session, gone.id)
        assert row.last_pulled_at is not None and row.pull_lease_owner is None
        assert row.last_commit_seen_at is None
        assert get_table(session, fine.id).last_commit_seen_at is not None


# Real tables --------------------------------------------------------------------------


def trips(ids: range, ts: int) -> pa.Table:
    keys = list(ids)
    return pa.table(
        {
            "id": pa.array([f"k{i:04d}" for i in keys]),
            "ts": pa.array([ts] * len(keys), pa.int64()),
            "fare": pa.array([float(i) for i in keys]),
        }
    )


def quiet_table(root: Path, version: int) -> HudiWriter:
    table = create_table(
        str(root / f"quiet_v{version}"),
        f"quiet_v{version}",
        table_type="MERGE_ON_READ",
        record_key_fields=["id"],
        ordering_field="ts",
        table_version=version,
    )
    return HudiWriter(table, max_file_rows=10)


@pytest.mark.parametrize("version", [6, 9])
def test_a_pull_records_what_notifications_would_and_runs_the_triggers(
    factory: sessionmaker[Session], tmp_path: Path, version: int
) -> None:
    writer = quiet_table(tmp_path, version)
    base = writer.table.base_path
    instants = [writer.insert(trips(range(30), ts=1))]
    instants += [writer.upsert(trips(range(0, 30, k), ts=t)) for k, t in ((3, 2), (5, 3))]
    with session_scope(factory) as session:
        table = register_table(
            session,
            db_name="db",
            table_name=f"quiet_v{version}",
            base_path=base,
            policy={"compaction_delta_commits": 3},
        ).table
    sweep = PullSweep(factory, OperationManager(pull_settings()), "i1", clock=Clock())

    report = sweep.run()
    assert report.pulled == [table.id] and report.new_commits == {table.id: 3}
    with session_scope(factory) as session:
        commits = sorted(list_commits(session, table.id), key=lambda c: c.instant)
        assert [(c.instant, c.action, c.pulled) for c in commits] == [
            (i, "deltacommit", True) for i in instants
        ]
        assert all(c.records > 0 for c in commits)
        assert commits[0].log_files == 0 and commits[1].log_files > 0  # inserts: base files
        assert sum(c.log_bytes for c in commits) > 0
        row = get_table(session, table.id)
        assert row.last_notification_at is None and row.last_commit_seen_at is not None
        assert row.last_commit_instant == instants[-1]
        # the third delta commit crossed the threshold: the trigger made a compaction
        [operation] = session.scalars(select(Operation).where(Operation.tbl_id == table.id))
        assert operation.action is ServiceAction.COMPACTION
        assert report.operations == {table.id: [operation.id]}
        assert row.delta_commits_since_compaction == 0  # restarted by the trigger
        assert row.log_files_since_compaction == 0

    # A writer that commits again without notifying: the next pull records that one only.
    later = writer.upsert(trips(range(0, 30, 7), ts=4))
    with session_scope(factory) as session:
        session.execute(update(Tbl).values(last_pulled_at=None))
    assert sweep.run().new_commits == {table.id: 1}
    with session_scope(factory) as session:
        newest = list_commits(session, table.id, limit=1)[0]
        assert (newest.instant, newest.pulled) == (later, True)
        assert get_table(session, table.id).delta_commits_since_compaction == 1
        stored = session.scalars(select(Commit.instant).where(Commit.tbl_id == table.id))
        assert sorted(stored) == sorted([*instants, later])
