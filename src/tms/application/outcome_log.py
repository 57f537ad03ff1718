"""One server log line per outcome of an operation, written once its transaction commits.

Outcomes are decided in several places (a job's result, a process that died, a failed
launch, an expired lease, a cancel, a removal, an operator's retry), each in this package,
which notes the outcome on the session right after the store's statement applied it; the
line is written when the transaction commits (`tms.at_commit`), so a transition that was
rolled back is never logged, and each committed one is logged once.
"""

from __future__ import annotations

import logging
from functools import partial

from sqlalchemy.orm import Session

from tms.at_commit import at_commit
from tms.store import Attempt, Operation, OperationStatus, Tbl

__all__ = ["note_outcome", "note_transition", "outcome_label"]

log = logging.getLogger("tms.outcomes")

_MAX_REASON = 500
S = OperationStatus


def outcome_label(from_status: OperationStatus, to: OperationStatus) -> str | None:
    """What a transition means for the operation's outcome; None for one that is not an
    outcome (a claim, a new due time)."""
    if to is S.SCHEDULED:
        if from_status is S.RUNNING:
            return "failed, retry scheduled"
        return "retried" if from_status in {S.FAILED, S.CANCELLED} else None
    if to.terminal and from_status is not to:
        return {S.COMPLETED: "completed", S.FAILED: "failed", S.CANCELLED: "cancelled"}.get(
            to, "invalid"
        )
    return None


def _level(label: str) -> int:
    return logging.INFO if label in {"completed", "cancelled", "retried"} else logging.WARNING


def _short(reason: str) -> str:
    """The first line (a job's error text may end with a log tail), bounded."""
    first = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    return first if len(first) <= _MAX_REASON else first[: _MAX_REASON - 1] + "…"


def note_outcome(
    session: Session,
    operation: Operation,
    label: str,
    reason: str,
    *,
    attempt: Attempt | None = None,
) -> None:
    """Log `operation`'s outcome (`label`: completed, failed, lost, …) with its table,
    action, instant, attempt number and reason once `session`'s transaction commits."""
    table = session.get(Tbl, operation.tbl_id)
    name = table.qualified_name if table is not None else f"#{operation.tbl_id}"
    message = (
        f"operation {operation.id} {label}: table {name}, {operation.action.value}, "
        f"instant {operation.instant or '-'}, attempt "
        f"{attempt.number if attempt is not None else '-'}; now {operation.status.value}: "
        f"{_short(reason)}"
    )
    at_commit(session, partial(log.log, _level(label), "%s", message))


def note_transition(
    session: Session,
    moved: Operation,
    from_status: OperationStatus,
    *,
    reason: str | None = None,
    detail: str | None = None,
    attempt: Attempt | None = None,
) -> None:
    """Log the outcome of a guarded transition from `from_status` to `moved`'s status, if
    it is one (`outcome_label`): the event's `reason` unless the label says it already, then
    `detail` (an attempt's error)."""
    label = outcome_label(from_status, moved.status)
    if label is None:
        return
    said = [part for part in (reason if reason != label else None, detail) if part]
    note_outcome(session, moved, label, ": ".join(said) or label, attempt=attempt)
