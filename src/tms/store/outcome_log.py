"""One server log line per outcome of an operation, written once its transaction commits.

Outcomes are recorded in several places (a job's result, a process that died, a failed
launch, an expired lease, a cancel, an operator's retry), each through the store. The store
notes each outcome on the session where it records it, and this module logs the notes when
the transaction commits, so a transition that was rolled back is never logged, and each
committed one is logged once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

from tms.store.models import Attempt, Operation, OperationStatus, Tbl

__all__ = ["note_outcome", "outcome_label"]

log = logging.getLogger("tms.outcomes")

_PENDING = "tms_outcomes"
_MAX_REASON = 500
S = OperationStatus


@dataclass(frozen=True)
class _Outcome:
    level: int
    message: str


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
    session.info.setdefault(_PENDING, []).append(_Outcome(_level(label), message))


@event.listens_for(Session, "after_commit")
def _log_committed(session: Session) -> None:
    for outcome in session.info.pop(_PENDING, ()):
        log.log(outcome.level, "%s", outcome.message)


@event.listens_for(Session, "after_transaction_end")
def _forget_uncommitted(session: Session, transaction: SessionTransaction) -> None:
    """Rolled back, or closed without a commit: those outcomes never happened. (A commit
    logged and removed its notes before its transaction ended.)"""
    if transaction.parent is None:
        session.info.pop(_PENDING, None)
