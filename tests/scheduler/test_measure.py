"""The measurement sweep: due tables measured on storage at a bounded rate, paused and
unreachable ones recorded with their reason, one instance per table. Real tables of the
sample writer, a real database; the rate is counted with a clock the test moves."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from tests.measure.test_layout import mor_table
from tms.config import Settings, load_settings
from tms.measure import DEFAULT_SMALL_FILE_LIMIT, LayoutMeasurement, layout_of
from tms.scheduler.measure import PAUSED, MeasureSweep
from tms.store import (
    MeasureTarget,
    TableMeasurement,
    Tbl,
    list_measurements,
    record_commits,
    register_table,
    session_scope,
)
from tms.store.commits import CommitIn


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def measure_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "measure_tables_per_minute": 600,
        "measure_interval_seconds": 900,
        "scheduler_interval_seconds": 1.0,
    }
    values.update(overrides)
    return load_settings(config_file=False, environ={}, **values)


def register(factory: sessionmaker[Session], name: str, base_path: str, **kw: Any) -> int:
    with session_scope(factory) as session:
        table = register_table(
            session, db_name="lake", table_name=name, base_path=base_path, **kw
        ).table
        return table.id


def rows(factory: sessionmaker[Session], tbl_id: int) -> list[TableMeasurement]:
    with factory() as session:
        return list_measurements(session, tbl_id, limit=100)


def test_due_tables_are_measured_paused_ones_skipped_and_missing_ones_failed(
    factory: sessionmaker[Session], tmp_path: Path
) -> None:
    base, _ = mor_table(tmp_path)
    trips = register(factory, "trips", base, policy={"small_file_limit": 3400})
    paused = register(factory, "paused", base + "_paused")
    missing = register(factory, "missing", str(tmp_path / "nothing_here"))
    with session_scope(factory) as session:
        session.execute(update(Tbl).where(Tbl.id == paused).values(paused=True))
        record_commits(session, [CommitIn(trips, "20261207000000001", "deltacommit", records=5)])
    sweep = MeasureSweep(factory, measure_settings(), "i1", clock=Clock())

    report = sweep.run()
    assert (report.measured, report.skipped, report.failed) == ([trips], [paused], [missing])
    [row] = rows(factory, trips)
    assert row.status == "measured" and row.reason is None
    assert row.layout is not None and row.writes is not None
    assert (row.layout["file_slices"], row.layout["partitions"]) == (6, 3)
    assert row.layout["read_amplification"]["log_files"] == 3
    assert (row.layout["small_file_limit"], row.layout["small_file_limit_source"]) == (
        3400,
        "policy",
    )
    assert row.writes["commits"] == 1 and row.writes["records"] == 5
    assert row.services == {}
    [skip] = rows(factory, paused)
    assert (skip.status, skip.reason, skip.layout) == ("skipped", PAUSED, None)
    [fail] = rows(factory, missing)
    assert fail.status == "failed" and fail.layout is None
    assert fail.reason is not None and "nothing_here" in fail.reason
    assert sweep.run().measured == []  # nothing due before the interval has passed


def test_the_sweep_measures_at_its_rate(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as session:
        for n in range(5):
            register_table(session, db_name="db", table_name=f"t{n}", base_path=f"/lake/t{n}")
    clock = Clock()
    measurer = CountingMeasurer()
    sweep = MeasureSweep(
        factory,
        measure_settings(measure_tables_per_minute=60),
        "i1",
        measurer=measurer,
        clock=clock,
    )
    assert len(sweep.run().measured) == 1  # one a second, none saved up
    assert sweep.run().measured == []
    clock.now += 2.5
    assert len(sweep.run().measured) == 1
    clock.now += 10
    assert len(sweep.run().measured) == 1
    assert len(measurer.seen) == 3


class CountingMeasurer:
    """Stands in for storage: an empty layout, the tables it was asked for, and a hook."""

    def __init__(self, during: Any = None) -> None:
        self.seen: list[int] = []
        self.during = during

    def layout(self, target: MeasureTarget) -> LayoutMeasurement:
        self.seen.append(target.tbl_id)
        if self.during is not None:
            self.during()
        return layout_of((), 0, DEFAULT_SMALL_FILE_LIMIT)


def test_two_instances_never_measure_one_table_twice(factory: sessionmaker[Session]) -> None:
    with session_scope(factory) as session:
        for n in range(4):
            register_table(session, db_name="db", table_name=f"t{n}", base_path=f"/lake/t{n}")
    settings = measure_settings(measure_tables_per_minute=120)  # two a round
    other_measurer = CountingMeasurer()
    other = MeasureSweep(factory, settings, "i2", measurer=other_measurer, clock=Clock())
    # While i1 measures its first table (its two leased), i2 runs whole rounds.
    first = CountingMeasurer(during=lambda: other.run() if len(first.seen) == 1 else None)
    sweep = MeasureSweep(factory, settings, "i1", measurer=first, clock=Clock())
    sweep.run()
    assert len(first.seen) == 2 and len(other_measurer.seen) == 2
    assert sorted(first.seen + other_measurer.seen) == sorted(set(first.seen + other_measurer.seen))
    with factory() as session:
        per_table = session.execute(
            select(TableMeasurement.tbl_id, func.count()).group_by(TableMeasurement.tbl_id)
        ).all()
    assert sorted(n for _, n in per_table) == [1, 1, 1, 1]
    assert sweep.run().measured == [] and other.run().measured == []


def test_a_table_whose_storage_hangs_fails_at_the_timeout_and_others_are_measured(
    factory: sessionmaker[Session],
) -> None:
    ids = []
    with session_scope(factory) as session:
        for n in range(2):
            table = register_table(
                session, db_name="db", table_name=f"t{n}", base_path=f"/lake/t{n}"
            )
            ids.append(table.table.id)
    release = threading.Event()

    class Hanging(CountingMeasurer):
        def layout(self, target: MeasureTarget) -> LayoutMeasurement:
            if target.tbl_id == ids[0]:
                release.wait(30)
            return super().layout(target)

    sweep = MeasureSweep(
        factory,
        measure_settings(measure_timeout_seconds=0.5),
        "i1",
        measurer=Hanging(),
        clock=Clock(),
    )
    started = time.monotonic()
    report = sweep.run()
    release.set()
    assert time.monotonic() - started < 10
    assert (report.failed, report.measured) == ([ids[0]], [ids[1]])
    [fail] = rows(factory, ids[0])
    assert fail.reason == "storage did not answer within 0.5s"
