"""Measurements kept per table: the sweep's leases, recording and retention, and the figures
read from the store (write rate from commits, services' cost from attempts)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from tests.store.helpers import make_op, make_table, record
from tms.store import (
    Attempt,
    AttemptOutcome,
    Commit,
    MeasurementIn,
    ServiceAction,
    TableMeasurement,
    Tbl,
    claim_measurements,
    delete_table,
    list_measurements,
    record_measurements,
    service_costs,
    write_rate,
)

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
DAY = 86400.0


def claim(session: Session, owner: str = "i1", now: datetime = NOW, **kw: float) -> list[int]:
    values = {"limit": 10, "lease_seconds": 60.0, "interval_seconds": 900.0, **kw}
    found = claim_measurements(
        session,
        owner,
        limit=int(values["limit"]),
        lease_seconds=values["lease_seconds"],
        interval_seconds=values["interval_seconds"],
        now=now,
    )
    return [t.tbl_id for t in found]


def measured(tbl_id: int, n: int = 1) -> MeasurementIn:
    return MeasurementIn(tbl_id, "measured", layout={"file_slices": n}, writes={}, services={})


def test_a_claim_leases_due_tables_once_and_a_turn_waits_for_the_interval(
    session: Session,
) -> None:
    a, b = make_table(session, "a"), make_table(session, "b", policy={"small_file_limit": 1024})
    paused = make_table(session, "p")
    session.execute(update(Tbl).where(Tbl.id == paused.id).values(paused=True))
    [first, *rest] = claim_measurements(
        session, "i1", limit=10, lease_seconds=60, interval_seconds=900, now=NOW
    )
    assert [first.tbl_id, *[t.tbl_id for t in rest]] == [a.id, b.id, paused.id]
    assert (first.name, first.paused, first.small_file_limit) == ("db.a", False, None)
    assert (rest[0].small_file_limit, rest[1].paused) == (1024, True)
    assert claim(session, "i2") == []  # leased to i1
    assert claim(session, "i2", now=NOW + timedelta(seconds=61)) == [a.id, b.id, paused.id]

    done = record_measurements(
        session, [measured(a.id)], "i2", keep_seconds=DAY, keep_rows=10, now=NOW
    )
    assert done == [a.id]
    later = NOW + timedelta(seconds=200)
    assert claim(session, "i3", now=later) == [b.id, paused.id]  # a: measured, not due
    skipped = MeasurementIn(paused.id, "skipped", "paused")
    turns = [measured(b.id), skipped]
    record_measurements(session, turns, "i3", keep_seconds=DAY, keep_rows=10, now=later)
    assert claim(session, "i4", now=NOW + timedelta(seconds=901)) == [a.id]


def test_a_turn_of_a_lease_lost_meanwhile_is_not_recorded(session: Session) -> None:
    table = make_table(session)
    assert claim(session, "i1") == [table.id]
    assert claim(session, "i2", now=NOW + timedelta(seconds=61)) == [table.id]
    assert (
        record_measurements(session, [measured(table.id)], "i1", keep_seconds=DAY, keep_rows=5)
        == []
    )
    assert list_measurements(session, table.id, limit=10) == []


def test_rows_are_listed_newest_first_and_pruned_by_age_and_count(session: Session) -> None:
    table, other = make_table(session, "a"), make_table(session, "b")
    for hour in range(6):
        at = NOW + timedelta(hours=hour)
        claim(session, now=at, interval_seconds=1)
        turns = [measured(table.id, hour), MeasurementIn(other.id, "failed", "storage gone")]
        record_measurements(session, turns, "i1", keep_seconds=4 * 3600, keep_rows=3, now=at)
    rows = list_measurements(session, table.id, limit=10)
    assert [r.layout for r in rows] == [{"file_slices": 5}, {"file_slices": 4}, {"file_slices": 3}]
    assert rows[0].measured_at == NOW + timedelta(hours=5)
    since = list_measurements(session, table.id, limit=10, since=NOW + timedelta(hours=4))
    assert len(since) == 2
    assert list_measurements(session, table.id, limit=1)[0].layout == {"file_slices": 5}
    failed = list_measurements(session, other.id, limit=10, status="failed")
    assert [(r.status, r.reason, r.layout) for r in failed] == [
        ("failed", "storage gone", None)
    ] * 3

    # Age: the next turn, five hours on, leaves the rows of the last four hours.
    at = NOW + timedelta(hours=10)
    claim(session, now=at, interval_seconds=1)
    record_measurements(
        session, [measured(table.id, 10)], "i1", keep_seconds=4 * 3600, keep_rows=3, now=at
    )
    assert [r.layout for r in list_measurements(session, table.id, limit=10)] == [
        {"file_slices": 10}
    ]


def test_removing_a_table_removes_its_measurements(session: Session) -> None:
    table = make_table(session)
    claim(session)
    record_measurements(session, [measured(table.id)], "i1", keep_seconds=DAY, keep_rows=5)
    delete_table(session, table.id)
    assert session.scalar(select(func.count()).select_from(TableMeasurement)) == 0


def test_the_write_rate_counts_the_writers_commits_of_the_last_day(session: Session) -> None:
    table = make_table(session)
    session.execute(update(Tbl).values(created_at=NOW - timedelta(days=3)))
    record(
        session,
        table.id,
        "20261207000000001",
        "deltacommit",
        records=100,
        bytes_written=4000,
        log_files=2,
        log_bytes=3000,
    )
    record(session, table.id, "20261207000000002", "commit", records=20, bytes_written=800, files=3)
    record(session, table.id, "20261207000000003", "compaction", records=999, bytes_written=99999)
    record(session, table.id, "20261205000000004", "deltacommit", records=7, bytes_written=7)
    session.execute(update(Commit).values(received_at=NOW - timedelta(hours=2)))
    session.execute(
        update(Commit)
        .where(Commit.instant == "20261205000000004")
        .values(received_at=NOW - timedelta(hours=25))
    )
    rate = write_rate(session, table.id, window_seconds=DAY, now=NOW)
    assert rate == {
        "window_hours": 24.0,
        "commits": 2,
        "records": 120,
        "bytes": 4800,
        "files": 3,
        "log_files": 2,
        "log_bytes": 3000,
        "commits_per_hour": round(2 / 24, 4),
        "records_per_hour": 5.0,
        "bytes_per_hour": 200.0,
    }


def test_a_table_registered_lately_is_rated_over_its_time_since(session: Session) -> None:
    table = make_table(session)
    session.execute(update(Tbl).values(created_at=NOW - timedelta(hours=2)))
    record(session, table.id, "20261207000000001", "commit", records=10, bytes_written=1000)
    session.execute(update(Commit).values(received_at=NOW - timedelta(hours=1)))
    rate = write_rate(session, table.id, window_seconds=DAY, now=NOW)
    assert (rate["window_hours"], rate["commits_per_hour"], rate["bytes_per_hour"]) == (
        2.0,
        0.5,
        500.0,
    )


def attempt(
    session: Session,
    operation_id: int,
    number: int,
    seconds: float,
    outcome: AttemptOutcome,
    figures: dict | None,
    ended: datetime = NOW,
) -> None:
    session.add(
        Attempt(
            operation_id=operation_id,
            number=number,
            instance_id="i1",
            started_at=ended - timedelta(seconds=seconds),
            finished_at=ended,
            outcome=outcome,
            figures=figures,
        )
    )
    session.flush()


def test_each_services_cost_says_how_its_executor_seconds_were_taken(session: Session) -> None:
    table = make_table(session)
    session.execute(update(Tbl).values(created_at=NOW - timedelta(days=3)))
    compaction = make_op(session, table)
    clean = make_op(session, table, ServiceAction.CLEAN)
    ok, failed = AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED
    attempt(session, compaction.id, 1, 100, failed, None)  # wall: 100
    attempt(
        session,
        compaction.id,
        2,
        90,
        ok,
        {"duration_seconds": 40.0, "file_groups": 3, "bytes_written": 5000, "files_written": 3},
    )
    attempt(
        session,
        clean.id,
        1,
        30,
        ok,
        {"executor_seconds": 12.5, "bytes_read": 70, "files_deleted": 4, "file_groups": 0},
    )
    attempt(session, clean.id, 2, 30, ok, {"executor_seconds": 1.0}, ended=NOW - timedelta(days=2))
    costs = service_costs(session, table.id, window_seconds=DAY, now=NOW)
    assert costs == {
        "clean": {
            "attempts": 1,
            "succeeded": 1,
            "failed": 0,
            "wall_seconds": 30.0,
            "executor_seconds": 12.5,
            "executor_seconds_basis": {"reported": 1},
            "bytes_written": 0,
            "bytes_read": 70,
            "files_written": 0,
            "file_groups": 0,
        },
        "compaction": {
            "attempts": 2,
            "succeeded": 1,
            "failed": 1,
            "wall_seconds": 190.0,
            "executor_seconds": 100.0 + 40.0 * 3,
            "executor_seconds_basis": {"wall": 1, "wall_x_tasks": 1},
            "bytes_written": 5000,
            "bytes_read": None,
            "files_written": 3,
            "file_groups": 3,
        },
    }
