"""Cancelling operations, one way for every caller.

In tms: a scheduled operation is CANCELLED at once; a running one gets `cancel_requested`
and its job stops at its next heartbeat (writing RFC-79's cancel request on the table
itself); cancelling a cancelled operation changes nothing; a finished one, and a running one
that is not cancellable, are refused. `cancel_operation` decides which, and the store's
guarded statements apply it.

On the table: a scheduled operation cancelled here whose plan is on the timeline (a planned
action with an instant) also gets RFC-79's cancel request written, so writers see it at once.
Unless the request is already there: the scheduler's cancel scan cancels operations because
writers wrote it. However it was cancelled, and whenever its job stopped, the plan of a
cancelled operation is then aborted by the scheduler (`abort_cancelled_plan`, run by
`tms.scheduler.cancelled_plans`). The request is written after the commit, on a
storage call bounded in time, under the table lock its writers use; a plan that is not
cancellable, a lock not taken and storage errors are logged, not refused: the operation is
cancelled in tms either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from tms import observe
from tms.application.outcome_log import note_transition
from tms.application.table_locks import open_locked
from tms.hudi.actions import PLANNED_ACTIONS
from tms.hudi.errors import CancelRefusedError, TableNotFoundError, UnsupportedTableError
from tms.hudi.locks import AdvisoryLocks, LockTimeoutError, use_advisory_locks
from tms.planning import BadJobInput
from tms.policies.params import table_wide_params
from tms.services.plan_cancel import execute_cancel, request_cancel
from tms.store import (
    Operation,
    OperationStatus,
    TransitionRefused,
    cancel_scheduled,
    get_operation,
    get_table,
    lock_operation,
    request_cancel_of_running,
)

__all__ = [
    "Cancelled",
    "TableAccess",
    "abort_cancelled_plan",
    "cancel",
    "cancel_operation",
    "request_on_table",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableAccess:
    """How a use case reaches a table's storage after its commit."""

    run: Callable[[Callable[[], None]], None]
    """Runs a storage call bounded in time (raising when storage does not answer)."""
    timeout: float
    """Seconds `run` waits: the table lock is waited for a second less."""
    locks: AdvisoryLocks
    """Takes a table's `postgres` lock (the table locks jobs take through the service)."""


@dataclass(frozen=True)
class Cancelled:
    """An operation after a cancel: `changed` when this call cancelled it or asked its job
    to stop, False when that was done already."""

    operation: Operation
    changed: bool


def cancel(
    session: Session, operation_ids: Sequence[int], *, reason: str, table: TableAccess | None
) -> list[Cancelled]:
    """Cancel the operations (see the module doc) in one transaction, in order, and commit;
    `TransitionRefused` (nothing changed) if one has finished. `table`: how to write the
    cancel requests of the plans cancelled, None when they are on the table already."""
    done: list[Cancelled] = []
    for operation_id in operation_ids:
        operation = get_operation(session, operation_id)
        if operation.cancel_settled:
            done.append(Cancelled(operation, changed=False))
        else:
            done.append(Cancelled(cancel_operation(session, operation_id, reason=reason), True))
    session.commit()
    stopped = [c.operation for c in done if c.changed and c.operation.status is _CANCELLED]
    for operation in stopped:
        observe.operation_moved(operation)
    if table is not None:
        request_on_table(session, stopped, table)
    return done


_CANCELLED = OperationStatus.CANCELLED
S = OperationStatus


def cancel_operation(
    session: Session, operation_id: int, *, reason: str = "cancelled by operator"
) -> Operation:
    """In the caller's transaction: SCHEDULED → CANCELLED at once. A RUNNING, cancellable
    operation gets `cancel_requested` (recorded as an event) and stays RUNNING until its job
    stops; a running operation that is not cancellable is refused (`TransitionRefused`), as
    is any other status."""
    current = lock_operation(session, operation_id)
    if current.status != S.RUNNING:
        cancelled = cancel_scheduled(session, operation_id, reason=reason)
        note_transition(session, cancelled, S.SCHEDULED, reason=reason)
        return cancelled
    if not current.cancellable:
        raise TransitionRefused(
            operation_id, "cancel", {S.SCHEDULED}, current.status, "not cancellable"
        )
    if current.cancel_requested:
        return current
    return request_cancel_of_running(session, operation_id, reason=reason)


def request_on_table(session: Session, cancelled: Iterable[Operation], access: TableAccess) -> None:
    """RFC-79's cancel request on the table for each of the cancelled operations that run a
    plan already on it (refusals and storage failures logged)."""
    for operation in cancelled:
        if operation.instant is None or operation.action not in PLANNED_ACTIONS:
            continue
        table = get_table(session, operation.tbl_id)
        write = partial(
            _request_cancel,
            table.base_path,
            dict(table.storage_options or {}),
            table_wide_params(table.policy or {}, operation.action),
            operation.instant,
            access.timeout,
            access.locks,
        )
        try:
            access.run(write)
        except Exception as exc:  # storage did not answer in time, or no storage thread free
            log.warning("cancel of %s on the table: %s", operation.instant, exc)


def abort_cancelled_plan(
    base_path: str,
    options: dict[str, Any],
    params: dict[str, Any],
    instant: str,
    *,
    heartbeat_interval: float,
    wait_seconds: float,
    locks: AdvisoryLocks,
) -> str:
    """On a storage thread: the plan of a cancelled operation aborted (RFC-79: the cancel
    request written, the plan's partial files rolled back, the plan aborted), under the table
    lock its writers use; what was found, once nothing is left to do (`aborted`, or why the
    plan stays: done, gone, not cancellable). Raises what a later try may get past: a job
    still beating the plan's heartbeat (`InstantInFlightError`), a lock held elsewhere,
    storage errors."""
    try:
        table = open_locked(base_path, options, params, wait_seconds)
    except (TableNotFoundError, UnsupportedTableError, BadJobInput) as exc:
        return f"no plan to abort: {exc}"
    with use_advisory_locks(locks):
        try:
            request_cancel(table, instant)
            outcome = execute_cancel(table, instant, heartbeat_interval=heartbeat_interval)
        except CancelRefusedError as exc:  # done, gone, or a plan that runs to completion
            return f"left as it is: {exc}"
    return outcome.state.lower()


def _request_cancel(
    base_path: str,
    options: dict[str, Any],
    params: dict[str, Any],
    instant: str,
    wait_seconds: float,
    locks: AdvisoryLocks,
) -> None:
    """RFC-79 `request_cancel` on a storage thread, under the table lock its writers use
    (`params`: the table's lock settings in Hudi's keys; `locks` takes a `postgres` one),
    waiting less than the storage timeout. Refusals (a plan that is not cancellable or no
    longer pending, a lock tms cannot take or did not get) and storage errors are logged."""
    try:
        table = open_locked(base_path, options, params, wait_seconds)
        with use_advisory_locks(locks):
            written = request_cancel(table, instant)
    except (CancelRefusedError, LockTimeoutError, UnsupportedTableError, BadJobInput) as exc:
        log.info("no cancel request written for %s at %s: %s", instant, base_path, exc)
        return
    except Exception as exc:
        log.warning("cancel request for %s at %s not written: %r", instant, base_path, exc)
        return
    if written:
        log.info("cancel requested on the table for %s at %s", instant, base_path)
