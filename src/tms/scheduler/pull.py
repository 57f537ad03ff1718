"""The pull fallback: the scheduler reads timelines of tables whose writers went quiet.

Every tick may start a round in the background (the tick never waits on storage). A round
takes as many tables as the listing budget allows right now (`Pacer`:
`pull_listings_per_minute`, one listing each, spread evenly over the minute, so 10,000
tables are all read without a burst), leases them in one statement (`claim_pulls`: silent
tables first, then the sweep's oldest; one instance per table), reads each one's timeline
and the commits the store has not heard of (each read on the round's storage threads, at
most `storage_threads` at once, waited on for the storage timeout), then records them all as
notifications would be, runs the triggers and ends the leases in one transaction
(`tms.ingest.pulled`). A table whose storage fails is logged and counted, and waits for its
next turn.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from tms import metrics, observe
from tms.application import OperationManager
from tms.blocking_calls import BlockingCalls
from tms.ingest.pulled import PulledCommit, PulledTimeline, read_new, read_timeline, write_pulled
from tms.rounds import BackgroundRound
from tms.store import PullTarget, claim_pulls, finish_pulls, known_instants, session_scope

__all__ = ["Pacer", "PullReport", "PullSweep", "TimelineReader"]

log = logging.getLogger(__name__)

BATCH = 100
"""Tables one claim leases at most (a round claims again while the budget lasts)."""


class Pacer:
    """`per_minute` slots a minute, one every `60 / per_minute` seconds. At most `burst`
    slots are saved up while rounds are apart (one scheduler interval's worth), and none
    while nothing is due (`lapse`), so listings never come in a burst."""

    def __init__(self, per_minute: int, clock: Callable[[], float], *, burst: int = 1) -> None:
        self.per_minute = per_minute
        self.burst = max(1, burst)
        self._clock = clock
        self._next: float | None = None

    @property
    def spacing(self) -> float:
        return 60.0 / self.per_minute

    def take(self, most: int) -> int:
        """Slots due now, up to `most`; they are used up."""
        if self.per_minute <= 0 or most <= 0:
            return 0
        now = self._clock()
        earliest = now - (self.burst - 1) * self.spacing
        if self._next is None or self._next < earliest:
            self._next = earliest
        if now < self._next:
            return 0
        slots = min(most, int((now - self._next) // self.spacing) + 1)
        self._next += slots * self.spacing
        return slots

    def lapse(self, unused: int) -> None:
        """Nothing more was due: `unused` slots of the last `take` are not saved up."""
        if self._next is not None:
            self._next = max(self._next - unused * self.spacing, self._clock())


class TimelineReader(Protocol):
    """Reads a table's timeline, then the instants the store has not heard of."""

    def timeline(self, target: PullTarget) -> PulledTimeline: ...

    def new_commits(self, pulled: PulledTimeline, known: Collection[str]) -> list[PulledCommit]: ...


@dataclass
class StorageTimelineReader:
    """The real reader: `tms.ingest.pulled` on the table's storage."""

    small_file_bytes: int

    def timeline(self, target: PullTarget) -> PulledTimeline:
        return read_timeline(target.base_path, target.storage_options)

    def new_commits(self, pulled: PulledTimeline, known: Collection[str]) -> list[PulledCommit]:
        return read_new(pulled, known, small_file_bytes=self.small_file_bytes)


@dataclass
class PullReport:
    """What one round did, by table id."""

    pulled: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    new_commits: dict[int, int] = field(default_factory=dict)
    operations: dict[int, list[int]] = field(default_factory=dict)


class PullSweep:
    """Pulls the tables that are due, at a bounded rate (see the module doc)."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        manager: OperationManager,
        instance_id: str,
        *,
        reader: TimelineReader | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = session_factory
        self._manager = manager
        self._settings = settings = manager.settings
        self._owner = instance_id
        self._reader = reader or StorageTimelineReader(settings.small_file_bytes)
        per_minute = settings.pull_listings_per_minute
        burst = math.ceil(per_minute * settings.scheduler_interval_seconds / 60)
        self.pacer = Pacer(per_minute, clock, burst=burst)
        self._calls = BlockingCalls(
            "tms-pull-storage",
            threads=settings.storage_threads,
            timeout=settings.storage_timeout_seconds,
        )
        self._round = BackgroundRound("tms-pull", self.run)

    @property
    def enabled(self) -> bool:
        s = self._settings
        wanted = s.notification_timeout_seconds > 0 or s.pull_sweep_interval_seconds > 0
        return s.pull_listings_per_minute > 0 and wanted

    def maybe_start(self) -> None:
        """Start a round in the background unless one is running."""
        if self.enabled:
            self._round.maybe_start()

    def join(self, timeout: float | None = None) -> None:
        self._round.join(timeout)

    def run(self) -> PullReport:
        """One round: pull tables while the budget allows and tables are due."""
        report = PullReport()
        if not self.enabled:
            return report
        while True:
            slots = self.pacer.take(BATCH)
            if slots == 0:
                return report
            started = time.perf_counter()
            with session_scope(self._factory) as session:
                targets = claim_pulls(
                    session,
                    self._owner,
                    limit=slots,
                    lease_seconds=self._lease_seconds(slots),
                    timeout_seconds=self._settings.notification_timeout_seconds,
                    sweep_seconds=self._settings.pull_sweep_interval_seconds,
                )
            metrics.PULL_CLAIM.observe(time.perf_counter() - started)
            read: dict[int, list[PulledCommit]] = {}
            for target in targets:
                commits = self._read(target)
                if commits is None:
                    metrics.PULLS.labels(_reason(target), "failed").inc()
                    report.failed.append(target.tbl_id)
                else:
                    read[target.tbl_id] = commits
            self._record(targets, read, report)
            if len(targets) < slots:
                self.pacer.lapse(slots - len(targets))  # nothing more is due
                return report

    def _lease_seconds(self, tables: int) -> float:
        # Each table's reads are bounded by the storage timeout (twice: timeline, commits).
        return 2 * self._calls.timeout * tables + 60

    def _read(self, target: PullTarget) -> list[PulledCommit] | None:
        """The commits of the table the store has not heard of; None when its storage
        failed (logged)."""
        try:
            pulled = self._calls.run(partial(self._reader.timeline, target))
            known: Collection[str] = ()
            if pulled.oldest is not None:
                with session_scope(self._factory) as session:
                    known = known_instants(session, target.tbl_id, since=pulled.oldest)
            return self._calls.run(partial(self._reader.new_commits, pulled, known))
        except Exception as exc:  # storage down, slow, or no table there any more
            log.warning("pull of table %s (%s) failed: %r", target.tbl_id, target.base_path, exc)
            return None

    def _record(
        self, targets: list[PullTarget], read: dict[int, list[PulledCommit]], report: PullReport
    ) -> None:
        """One transaction for the round: the commits read, the triggers, the leases ended
        (those of the failed tables too: they wait for their next turn)."""
        if not targets:
            return
        ids = [t.tbl_id for t in targets]
        try:
            with session_scope(self._factory) as session:
                recorded = write_pulled(session, self._manager, read)
                finish_pulls(session, ids, self._owner)
        except Exception:  # the database, not storage: the leases run out, pulled again
            log.exception("pulls of tables %s not recorded", ids)
            return
        for target in targets:
            done = recorded.get(target.tbl_id)
            if done is None:
                continue  # failed to read, or removed meanwhile
            metrics.PULLS.labels(_reason(target), "pulled").inc()
            metrics.PULLED_COMMITS.inc(done.new)
            observe.operations_created(done.operations, "policy")
            report.pulled.append(target.tbl_id)
            report.new_commits[target.tbl_id] = done.new
            report.operations[target.tbl_id] = [op.id for op in done.operations]
            if done.new:
                log.info(
                    "pulled table %s (%s): %d commit(s) not notified, %d operation(s) created",
                    target.tbl_id,
                    _reason(target),
                    done.new,
                    len(done.operations),
                )


def _reason(target: PullTarget) -> str:
    return "silent" if target.silent else "sweep"
