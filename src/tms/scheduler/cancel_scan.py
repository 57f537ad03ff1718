"""Writers' cancel requests (RFC-79's `.hoodie/.cancel/<instant>`) for plans whose
operations wait to run.

A running job notices a request at its next heartbeat. An operation that waits (due later,
retrying after a backoff, queued behind others) would notice it only once claimed, so every
`cancel_scan_interval_seconds` the scheduler lists the cancel folder of each table with such
plans (one LIST per table, on the scan's storage threads: at most `storage_threads` at once,
each waited on for the storage timeout) and cancels the operations whose cancellable plans a
writer asked to cancel, with the reason, as every cancel does (`tms.application.cancel`) but
for the request on the table, which the writer wrote. The plan is then aborted as every
cancelled operation's is (`scheduler.cancelled_plans`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from tms.application import OperationManager
from tms.blocking_calls import BlockingCalls
from tms.hudi.actions import PLANNED_ACTIONS
from tms.hudi.storage import Storage
from tms.hudi.table import HudiTable
from tms.hudi.timeline import cancel_requests as table_cancel
from tms.rounds import BackgroundRound
from tms.store import (
    OperationStatus,
    ServiceAction,
    TransitionRefused,
    session_scope,
    waiting_plans,
)

__all__ = ["CancelScan"]

log = logging.getLogger(__name__)

PLANNED = tuple(ServiceAction(action) for action in PLANNED_ACTIONS)
BATCH = 500
"""Waiting operations one scan reads; the next scan goes on from the last table."""


@dataclass
class _Waiting:
    base_path: str
    storage_options: dict[str, Any]
    operations: dict[str, int] = field(default_factory=dict)
    """Operation ids by instant."""


class CancelScan:
    """Cancels waiting operations whose plans writers asked to cancel (see the module doc)."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        manager: OperationManager,
        *,
        interval_seconds: float,
        storage_timeout_seconds: float,
        storage_threads: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = session_factory
        self._manager = manager
        self.interval_seconds = interval_seconds
        self._calls = BlockingCalls(
            "tms-cancel-scan-storage", threads=storage_threads, timeout=storage_timeout_seconds
        )
        self._clock = clock
        self._after_table = 0
        self._round = BackgroundRound(
            "tms-cancel-scan", self.run, interval_seconds=interval_seconds, clock=clock
        )

    def maybe_start(self) -> None:
        """Start a scan in the background when one is due and none is running (the tick
        does not wait on storage)."""
        if self.interval_seconds > 0:
            self._round.maybe_start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for a scan started in the background to end."""
        self._round.join(timeout)

    def run(self) -> list[int]:
        """One scan: the ids of the operations it cancelled."""
        cancelled: list[int] = []
        for waiting in self._next_tables().values():
            try:
                requested = self._calls.run(
                    partial(
                        _cancel_requested,
                        waiting.base_path,
                        waiting.storage_options,
                        sorted(waiting.operations),
                    )
                )
            except Exception as exc:  # storage down or slow: the next scan tries again
                log.warning("cancel requests at %s not read: %r", waiting.base_path, exc)
                continue
            for instant in requested:
                if self._cancel(waiting.operations[instant], instant):
                    cancelled.append(waiting.operations[instant])
        return cancelled

    def _next_tables(self) -> dict[int, _Waiting]:
        with session_scope(self._factory) as session:
            rows = waiting_plans(session, PLANNED, after_table=self._after_table, limit=BATCH)
            tables: dict[int, _Waiting] = {}
            for operation, table in rows:
                assert operation.instant is not None
                waiting = tables.setdefault(
                    table.id, _Waiting(table.base_path, dict(table.storage_options or {}))
                )
                waiting.operations[operation.instant] = operation.id
        if len(rows) < BATCH:
            self._after_table = 0  # round done: start again from the first table
        elif len(tables) > 1:
            last = max(tables)
            del tables[last]  # cut off mid-table: the next scan reads it whole
            self._after_table = max(tables)
        else:
            self._after_table = max(tables)
        return tables

    def _cancel(self, operation_id: int, instant: str) -> bool:
        path = table_cancel.cancel_path(instant)
        reason = f"a writer requested the cancel of plan {instant} ({path})"
        try:
            with session_scope(self._factory) as session:
                (done,) = self._manager.cancel(session, [operation_id], reason=reason, table=None)
        except TransitionRefused:
            return False  # it started (its job sees the request) or ended meanwhile
        if not done.changed or done.operation.status is not OperationStatus.CANCELLED:
            return False
        log.info("operation %s cancelled: %s", operation_id, reason)
        return True


def _cancel_requested(
    base_path: str, storage_options: dict[str, Any], instants: list[str]
) -> list[str]:
    """Which of the plans at `instants` a writer asked to cancel and may be cancelled: one
    LIST of the cancel folder, and the timeline only when a request matches."""
    storage = Storage(base_path, storage_options=storage_options)
    requested = sorted(set(table_cancel.cancel_requests(storage)).intersection(instants))
    if not requested:
        return []
    timeline = HudiTable.open(base_path, storage_options=storage_options).timeline()
    found = []
    for instant_time in requested:
        instant = timeline.get(instant_time)
        if (
            instant is not None
            and instant.is_pending
            and table_cancel.is_cancellable(timeline, instant)
        ):
            found.append(instant_time)
    return found
