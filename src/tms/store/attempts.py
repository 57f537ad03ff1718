"""Attempts: the job's scoped token, launch details, and history per operation."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from tms.store.errors import NotFound
from tms.store.models import Attempt, AttemptOutcome

__all__ = [
    "attempt_for_token",
    "get_attempt",
    "hash_token",
    "issue_attempt_token",
    "list_attempts",
    "record_first_heartbeat",
    "record_launch",
    "record_progress",
    "set_exit_code",
]


def hash_token(token: str) -> str:
    """Only the sha256 of a job token is stored: a database dump cannot impersonate a job."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_attempt_token(session: Session, attempt: Attempt) -> str:
    """A fresh bearer token for the attempt's job (spec, heartbeats, result); replaces any
    earlier one. Returned once, in clear, to hand to the launched process."""
    token = secrets.token_urlsafe(32)
    session.execute(
        update(Attempt)
        .where(Attempt.id == attempt.id)
        .values(token_hash=hash_token(token))
        .execution_options(synchronize_session="fetch")
    )
    return token


def attempt_for_token(session: Session, token: str, *, running_only: bool = True) -> Attempt | None:
    """The attempt a job token belongs to; by default only while it is still RUNNING."""
    stmt = select(Attempt).where(Attempt.token_hash == hash_token(token))
    if running_only:
        stmt = stmt.where(Attempt.outcome == AttemptOutcome.RUNNING)
    return session.scalars(stmt).one_or_none()


def get_attempt(session: Session, attempt_id: int) -> Attempt:
    attempt = session.get(Attempt, attempt_id)
    if attempt is None:
        raise NotFound("attempt", attempt_id)
    return attempt


def list_attempts(session: Session, operation_id: int) -> list[Attempt]:
    """In launch order."""
    stmt = select(Attempt).where(Attempt.operation_id == operation_id).order_by(Attempt.number)
    return list(session.scalars(stmt))


def record_launch(
    session: Session,
    attempt: Attempt,
    *,
    spark_app_id: str | None = None,
    log_path: str | None = None,
) -> None:
    """What the engine learnt while launching: log file, then the Spark application id."""
    values = {k: v for k, v in {"spark_app_id": spark_app_id, "log_path": log_path}.items() if v}
    if values:
        session.execute(
            update(Attempt)
            .where(Attempt.id == attempt.id)
            .values(**values)
            .execution_options(synchronize_session="fetch")
        )


def record_first_heartbeat(session: Session, attempt: Attempt) -> None:
    """The job's first heartbeat: its launch ended (kept once)."""
    session.execute(
        update(Attempt)
        .where(Attempt.id == attempt.id, Attempt.first_heartbeat_at.is_(None))
        .values(first_heartbeat_at=func.now())
        .execution_options(synchronize_session="fetch")
    )


def set_exit_code(session: Session, attempt_id: int, code: int) -> None:
    """Keep the process's exit code on the attempt, whoever finished it."""
    session.execute(
        update(Attempt)
        .where(Attempt.id == attempt_id, Attempt.exit_code.is_(None))
        .values(exit_code=code)
        .execution_options(synchronize_session=False)
    )


def record_progress(session: Session, attempt_id: int, progress: dict[str, Any]) -> bool:
    """Keep what a running attempt's job last said it was doing; an attempt that has ended
    keeps its last progress (False: nothing written)."""
    result = session.execute(
        update(Attempt)
        .where(Attempt.id == attempt_id, Attempt.outcome == AttemptOutcome.RUNNING)
        .values(progress=progress, progress_at=func.now())
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))
