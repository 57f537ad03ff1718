"""Aborting the plans that cancelled operations left on their tables.

A job that a cancel stops cancels its plan on the table itself (RFC-79). But a cancel can
stop a job before it can: still starting Spark when the scheduler's patience ran out and it
was killed, killed by the machine, cut off from the service. Its operation is CANCELLED all
the same, and its plan, left pending, would hold its file groups: a retry would plan around
them and run nothing.

So every move to CANCELLED of an operation with a plan on the table marks it
(`store.cancelled_plans`), and in the background the scheduler aborts each marked plan as
RFC-79 does (cancel request, rollback of its partial files, abort) under the table lock its
writers use, on storage threads bounded in number and time, then clears the mark. A plan
whose heartbeat still beats (a job still running it, which the request written now stops) or
a table lock held elsewhere is tried again at the next round; a plan that completed, left
the timeline or is not cancellable (it runs to completion, as Hudi requires) is left as it
is. Until the mark is cleared no operation of that table and action that would plan is
claimed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from tms.application.cancel import abort_cancelled_plan
from tms.blocking_calls import BlockingCalls
from tms.hudi.errors import InstantInFlightError
from tms.hudi.locks import AdvisoryLocks
from tms.policies.params import table_wide_params
from tms.rounds import BackgroundRound
from tms.store import plan_settled, plans_to_abort, session_scope

__all__ = ["CancelledPlans"]

log = logging.getLogger(__name__)

BATCH = 100
"""Marked operations one round reads; the next round goes on with the rest."""


@dataclass(frozen=True)
class _Plan:
    operation_id: int
    instant: str
    base_path: str
    storage_options: dict[str, Any]
    params: dict[str, Any]


class CancelledPlans:
    """Aborts the plans of cancelled operations (see the module doc)."""

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        locks: AdvisoryLocks,
        interval_seconds: float,
        heartbeat_interval_seconds: float,
        storage_timeout_seconds: float,
        storage_threads: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = session_factory
        self._locks = locks
        self._heartbeat_interval = heartbeat_interval_seconds
        self._timeout = storage_timeout_seconds
        self._calls = BlockingCalls(
            "tms-cancelled-plans-storage", threads=storage_threads, timeout=storage_timeout_seconds
        )
        self._round = BackgroundRound(
            "tms-cancelled-plans", self.run, interval_seconds=interval_seconds, clock=clock
        )

    def maybe_start(self) -> None:
        """Start a round in the background when one is due and none is running."""
        self._round.maybe_start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for a round started in the background to end."""
        self._round.join(timeout)

    def run(self) -> list[int]:
        """One round: the ids of the operations whose plans it settled."""
        settled: list[int] = []
        for plan in self._marked():
            found = self._abort(plan)
            if found is None:
                continue
            with session_scope(self._factory) as session:
                plan_settled(session, plan.operation_id)
            log.info(
                "plan %s of cancelled operation %s at %s: %s",
                plan.instant,
                plan.operation_id,
                plan.base_path,
                found,
            )
            settled.append(plan.operation_id)
        return settled

    def _marked(self) -> list[_Plan]:
        with session_scope(self._factory) as session:
            return [
                _Plan(
                    operation.id,
                    operation.instant or "",
                    table.base_path,
                    dict(table.storage_options or {}),
                    table_wide_params(table.policy or {}, operation.action),
                )
                for operation, table in plans_to_abort(session, limit=BATCH)
            ]

    def _abort(self, plan: _Plan) -> str | None:
        """What became of the plan; None when a later round must try again."""
        call = partial(
            abort_cancelled_plan,
            plan.base_path,
            plan.storage_options,
            plan.params,
            plan.instant,
            heartbeat_interval=self._heartbeat_interval,
            wait_seconds=self._timeout,
            locks=self._locks,
        )
        try:
            return self._calls.run(call)
        except InstantInFlightError as exc:
            log.info("plan %s of operation %s: %s", plan.instant, plan.operation_id, exc)
        except Exception as exc:  # storage down or slow, the lock held: the next round
            log.warning(
                "plan %s of cancelled operation %s at %s not aborted yet: %r",
                plan.instant,
                plan.operation_id,
                plan.base_path,
                exc,
            )
        return None
