"""Builders shared by the alert tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from tests.store.helpers import claim, make_op, make_table
from tms import metrics
from tms.application.attempt_end import Failed, finish_attempt
from tms.backoff import Backoff
from tms.config import Settings, load_settings
from tms.store import Alert, Operation, Tbl

NO_JITTER = Backoff(base_seconds=60, factor=2, max_seconds=3600, jitter=0)


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "retry_base_seconds": 60.0,
        "retry_factor": 2.0,
        "retry_max_seconds": 3600.0,
        "retry_jitter": 0.0,
        "notification_timeout_seconds": 0.0,  # no silent tables unless a test asks
    }
    return load_settings(config_file=False, environ={}, **(values | overrides))


def fail_for_good(session: Session, name: str = "trips", error: str = "bad plan") -> Operation:
    """A table with an operation that ran once and FAILED (not retryable); committed."""
    table = make_table(session, name)
    operation = make_op(session, table, max_retries=2, owner="team-a")
    (claimed,) = [c for c in claim(session) if c.operation.id == operation.id]
    finished = finish_attempt(
        session, claimed.attempt, Failed(error, retryable=False, exit_code=1), backoff=NO_JITTER
    )
    assert finished is not None
    session.commit()
    return finished.operation


def alerts(session: Session) -> list[Alert]:
    return list(session.scalars(select(Alert).order_by(Alert.id)))


def set_table(session: Session, table_id: int, **values: Any) -> None:
    session.execute(update(Tbl).where(Tbl.id == table_id).values(**values))


def counted(kind: str, outcome: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "tms_alerts_total", {"kind": kind, "outcome": outcome}
    )
    return value or 0.0
