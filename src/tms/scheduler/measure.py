"""The measurement sweep: each table's layout, write rate and table services' cost, taken
every `measure_interval_seconds` and kept as its time series (`tms.store.measurements`).

Every tick may start a round in the background (the tick never waits on storage). A round
takes as many tables as the budget allows right now (`Pacer`: `measure_tables_per_minute`,
spread evenly), leases them in one statement (oldest turn first; one instance per table),
and measures each one: its latest file slices on storage (`tms.measure`, on the round's
storage threads, waited on for `measure_timeout_seconds`), then its write rate and service
costs from the store. One transaction records the round's turns, moves the tables' clocks,
ends the leases and prunes rows past retention. A paused table is skipped and a table whose
storage fails is recorded as failed, each with its reason; either waits for its next turn.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from tms import metrics, observe
from tms.blocking_calls import BlockingCalls
from tms.config import Settings
from tms.hudi.storage.requests import counting
from tms.hudi.table import HudiTable
from tms.measure import LayoutMeasurement, measure_table
from tms.rounds import BackgroundRound
from tms.scheduler.pull import Pacer
from tms.store import (
    MeasurementIn,
    MeasureTarget,
    claim_measurements,
    record_measurements,
    service_costs,
    session_scope,
    write_rate,
)

__all__ = ["MeasureReport", "MeasureSweep", "StorageMeasurer", "TableMeasurer"]

log = logging.getLogger(__name__)

BATCH = 20
"""Tables one claim leases at most (a round claims again while the budget lasts)."""
WINDOW_SECONDS = 24 * 3600.0
"""The write rate and the services' cost are taken over the last day."""
KEEP_ROWS = 2000
"""Measurements kept per table at most, whatever the retention."""
PAUSED = "paused: the table's services are paused, so its layout is not read"
_MAX_REASON = 500


class TableMeasurer(Protocol):
    """Reads a table's layout from its storage (blocking)."""

    def layout(self, target: MeasureTarget) -> LayoutMeasurement: ...


class StorageMeasurer:
    """The real measurer: `tms.measure` on the table's storage, its requests counted in
    `tms_storage_requests_total{action="measure"}`."""

    def layout(self, target: MeasureTarget) -> LayoutMeasurement:
        with counting() as requests:
            try:
                table = HudiTable.open(target.base_path, target.storage_options)
                return measure_table(table, target.small_file_limit)
            finally:
                observe.record_storage_requests(target.name, "measure", requests.as_dict())


@dataclass
class MeasureReport:
    """What one round did, by table id."""

    measured: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Turn:
    target: MeasureTarget
    status: str
    reason: str | None = None
    layout: LayoutMeasurement | None = None


class MeasureSweep:
    """Measures the tables that are due, at a bounded rate (see the module doc)."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        settings: Settings,
        instance_id: str,
        *,
        measurer: TableMeasurer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = session_factory
        self._settings = settings
        self._owner = instance_id
        self._measurer = measurer or StorageMeasurer()
        per_minute = settings.measure_tables_per_minute
        burst = math.ceil(per_minute * settings.scheduler_interval_seconds / 60)
        self.pacer = Pacer(per_minute, clock, burst=burst)
        self._calls = BlockingCalls(
            "tms-measure-storage",
            threads=settings.storage_threads,
            timeout=settings.measure_timeout_seconds,
        )
        self._round = BackgroundRound("tms-measure", self.run)

    @property
    def enabled(self) -> bool:
        s = self._settings
        return s.measure_interval_seconds > 0 and s.measure_tables_per_minute > 0

    def maybe_start(self) -> None:
        """Start a round in the background unless one is running."""
        if self.enabled:
            self._round.maybe_start()

    def join(self, timeout: float | None = None) -> None:
        self._round.join(timeout)

    def run(self) -> MeasureReport:
        """One round: measure tables while the budget allows and tables are due."""
        report = MeasureReport()
        if not self.enabled:
            return report
        while True:
            slots = self.pacer.take(BATCH)
            if slots == 0:
                return report
            with session_scope(self._factory) as session:
                targets = claim_measurements(
                    session,
                    self._owner,
                    limit=slots,
                    lease_seconds=self._calls.timeout * slots + 60,
                    interval_seconds=self._settings.measure_interval_seconds,
                )
            self._record([self._measure(t) for t in targets], report)
            if len(targets) < slots:
                self.pacer.lapse(slots - len(targets))  # nothing more is due
                return report

    def _measure(self, target: MeasureTarget) -> _Turn:
        """The table's layout read from storage; skipped when paused, failed (with why)
        when its storage fails or takes too long."""
        if target.paused:
            return _Turn(target, "skipped", PAUSED)
        try:
            layout = self._calls.run(partial(self._measurer.layout, target))
        except Exception as exc:  # storage down, slow, or no table there any more
            log.warning("measuring table %s (%s) failed: %r", target.tbl_id, target.base_path, exc)
            return _Turn(target, "failed", _reason(exc))
        return _Turn(target, "measured", layout=layout)

    def _record(self, turns: list[_Turn], report: MeasureReport) -> None:
        """One transaction for the round's turns: the store's figures read, the rows
        written, the clocks moved, the leases ended, old rows pruned."""
        if not turns:
            return
        try:
            with session_scope(self._factory) as session:
                rows = [self._row(session, turn) for turn in turns]
                recorded = set(
                    record_measurements(
                        session,
                        rows,
                        self._owner,
                        keep_seconds=self._settings.measure_retention_days * 86400,
                        keep_rows=KEEP_ROWS,
                    )
                )
        except Exception:  # the database, not storage: the leases run out, measured again
            log.exception(
                "measurements of tables %s not recorded", [t.target.tbl_id for t in turns]
            )
            return
        for turn in turns:
            if turn.target.tbl_id in recorded:
                metrics.MEASUREMENTS.labels(turn.status).inc()
                getattr(report, turn.status).append(turn.target.tbl_id)

    def _row(self, session: Session, turn: _Turn) -> MeasurementIn:
        tbl_id = turn.target.tbl_id
        if turn.layout is None:
            return MeasurementIn(tbl_id, turn.status, turn.reason)
        return MeasurementIn(
            tbl_id,
            turn.status,
            layout=turn.layout.to_dict(),
            writes=write_rate(session, tbl_id, window_seconds=WINDOW_SECONDS),
            services=service_costs(session, tbl_id, window_seconds=WINDOW_SECONDS),
        )


def _reason(exc: BaseException) -> str:
    """Why a measurement failed, for its row (the exception's own words, bounded)."""
    text = str(exc) or type(exc).__name__
    if not isinstance(exc, TimeoutError):
        text = f"{type(exc).__name__}: {text}"
    return text[:_MAX_REASON]
