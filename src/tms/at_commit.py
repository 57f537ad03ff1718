"""Work that waits for a session's transaction to commit.

A metric or a log line that describes a change must not be emitted for a change that was
rolled back, and must be emitted once for one that committed. `at_commit` keeps the work on
the session; it runs when the outermost transaction commits and is dropped when that
transaction ends any other way (a rollback, a close without a commit).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

__all__ = ["at_commit"]

_PENDING = "tms_at_commit"


def at_commit(session: Session, action: Callable[[], object]) -> None:
    """Run `action` once `session`'s transaction commits; never if it does not."""
    session.info.setdefault(_PENDING, []).append(action)


@event.listens_for(Session, "after_commit")
def _run_committed(session: Session) -> None:
    for action in session.info.pop(_PENDING, ()):
        action()


@event.listens_for(Session, "after_transaction_end")
def _forget_uncommitted(session: Session, transaction: SessionTransaction) -> None:
    """Rolled back, or closed without a commit: that work describes nothing that happened.
    (A commit ran and removed its work before its transaction ended.)"""
    if transaction.parent is None:
        session.info.pop(_PENDING, None)
