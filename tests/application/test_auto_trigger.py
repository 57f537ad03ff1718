"""The `auto` trigger end to end on a real database: the table's latest measurement comes
with its counters (from the counting statement and from the pull's read alike), and a
measurement over the target makes a SCHEDULED compaction whose first event says why."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from tests.store.helpers import db_now, make_table, record
from tms.application import apply_triggers
from tms.config import load_settings
from tms.store import (
    OperationStatus,
    ServiceAction,
    TableMeasurement,
    TableType,
    list_events,
)
from tms.store.pulls import counted_tables

AUTO = {"triggers": {"compaction": {"auto": {"max_log_files_per_slice": 6}}}}
LAYOUT: dict[str, Any] = {
    "log_files_per_slice": {"count": 4, "total": 30, "p5": 1, "p50": 8, "p95": 9, "max": 9},
    "log_bytes_per_slice": {"count": 4, "total": 9_000, "p50": 2_000, "p95": 3_000},
    "base_file_bytes": {"count": 4, "p50": 1_000, "p95": 1_000},
    "small_file_limit": 104_857_600,
    "small_files": 4,
}
SERVICES = {"compaction": {"attempts": 2, "executor_seconds": 82.0}}


def measure(
    session: Session, tbl_id: int, at: datetime, status: str = "measured", **figures: Any
) -> None:
    session.add(TableMeasurement(tbl_id=tbl_id, measured_at=at, status=status, **figures))
    session.flush()


def test_a_measurement_over_target_schedules_a_compaction_with_its_reason(
    session: Session,
) -> None:
    settings = load_settings(config_file=False, environ={})
    table = make_table(session, table_type=TableType.MERGE_ON_READ, policy=AUTO)
    now = db_now(session)
    counted = record(session, table.id, "20260101000000001", "deltacommit")
    assert counted is not None and counted.measurement is None
    assert apply_triggers(session, [counted], settings, now=now) == {}  # nothing measured

    measure(session, table.id, now - timedelta(hours=2), layout={"small_files": 0})
    measure(session, table.id, now - timedelta(minutes=5), layout=LAYOUT, services=SERVICES)
    measure(session, table.id, now - timedelta(minutes=1), status="failed", reason="timeout")
    counted = record(session, table.id, "20260101000000002", "deltacommit")
    assert counted is not None and counted.measurement is not None
    (read,) = counted_tables(session, [table.id])
    assert read.measurement == counted.measurement  # the pull's read loads it alike
    latest = counted.measurement
    assert abs(latest.measured_at - (now - timedelta(minutes=5))) < timedelta(milliseconds=1)
    assert (latest.layout, latest.services) == (LAYOUT, SERVICES)

    stale = now + timedelta(hours=1)  # 65 minutes after the measurement: decides nothing
    assert apply_triggers(session, [counted], settings, now=stale) == {}
    (operation,) = apply_triggers(session, [counted], settings, now=now)[table.id]
    assert (operation.action, operation.status) == (
        ServiceAction.COMPACTION,
        OperationStatus.SCHEDULED,
    )
    (event,) = list_events(session, operation.id)
    assert event.reason == (
        "policy: compacting: 9 log files per slice at p95, target 6; "
        "expected cost 41 executor-seconds"
    )
    # Pending now: the same measurement creates nothing more.
    (after,) = counted_tables(session, [table.id])
    assert ServiceAction.COMPACTION in after.pending_actions
    assert apply_triggers(session, [after], settings, now=now) == {}
