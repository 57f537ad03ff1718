"""Alerts: rows to deliver to the operators' webhook, raised in the transaction that saw
the reason (an operation that ended FAILED, a table silent for too long).

Raising is idempotent by `dedupe_key` (`INSERT … ON CONFLICT DO NOTHING`), so an alert is
raised once per event however many instances see it. Delivery is a small queue: a claim
takes due PENDING rows `FOR UPDATE SKIP LOCKED` and moves their `next_attempt_at` past a
short lease, so each alert is tried by one instance at a time and is tried again by any
instance if that one dies mid-try; the try's result (what `tms.alerts` decided of it) is
recorded only while no other claim recorded one since (`deliveries` unchanged). Who raises and
records counts it (`tms_alerts_total`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Numeric,
    Text,
    case,
    cast,
    exists,
    extract,
    func,
    literal,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from tms.store.models import Alert, AlertStatus, Attempt, Operation, Tbl

__all__ = [
    "ALERT_KINDS",
    "OPERATION_FAILED",
    "TABLE_SILENT",
    "alerts_of_operation",
    "claim_due_alerts",
    "list_alerts",
    "raise_alert",
    "raise_operation_failed",
    "raise_silent_tables",
    "record_delivery",
]

OPERATION_FAILED = "operation_failed"
TABLE_SILENT = "table_silent"
ALERT_KINDS = (OPERATION_FAILED, TABLE_SILENT)
RECENT_ATTEMPTS = 10
"""Attempts an operation_failed alert carries (the latest ones)."""
MAX_ERROR_CHARS = 4000
"""Error texts in a payload and `last_error` are cut to this (a job's error may end with a
log tail)."""


def _clock(now: datetime | None) -> ColumnElement[datetime]:
    """The database clock, unless a caller (a test) pins it."""
    return func.now() if now is None else literal(now)


def trim(text: str | None, limit: int = MAX_ERROR_CHARS) -> str | None:
    """The text cut to `limit` characters (its end dropped, marked)."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def raise_alert(
    session: Session,
    *,
    kind: str,
    tbl_id: int,
    operation_id: int | None,
    payload: dict[str, Any],
    dedupe_key: str,
    now: datetime | None = None,
) -> Alert | None:
    """Record an alert in the caller's transaction; None when `dedupe_key` was raised
    before (the alert exists already: nothing changes)."""
    values: dict[str, Any] = {
        "kind": kind,
        "dedupe_key": dedupe_key,
        "tbl_id": tbl_id,
        "operation_id": operation_id,
        "payload": payload,
    }
    if now is not None:
        values |= {"created_at": now, "next_attempt_at": now}
    stmt = (
        insert(Alert)
        .values(**values)
        .on_conflict_do_nothing(index_elements=[Alert.dedupe_key])
        .returning(Alert)
        .execution_options(populate_existing=True)
    )
    return session.scalars(stmt).one_or_none()


def table_json(table: Tbl) -> dict[str, Any]:
    return {
        "id": table.id,
        "db_name": table.db_name,
        "table_name": table.table_name,
        "base_path": table.base_path,
    }


def _attempt_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "outcome": attempt.outcome.value,
        "exit_code": attempt.exit_code,
        "error": trim(attempt.error),
        "started_at": _iso(attempt.started_at),
        "finished_at": _iso(attempt.finished_at),
    }


def _raised_at(session: Session, now: datetime | None) -> datetime:
    return now if now is not None else session.execute(select(func.now())).scalar_one()


def raise_operation_failed(
    session: Session,
    operation: Operation,
    attempt: Attempt | None,
    *,
    now: datetime | None = None,
) -> Alert | None:
    """The alert of an operation that just ended FAILED (call after its attempt's row is
    finished, so the payload shows how it ended). Keyed by the attempt that ended it: an
    operation retried by an operator that fails again alerts again."""
    table = session.get_one(Tbl, operation.tbl_id)
    attempts = list(
        session.scalars(
            select(Attempt)
            .where(Attempt.operation_id == operation.id)
            .order_by(Attempt.number.desc())
            .limit(RECENT_ATTEMPTS)
            .execution_options(populate_existing=True)
        )
    )
    attempts.reverse()
    cycle = attempt.id if attempt is not None else f"run{operation.run_times}"
    payload = {
        "kind": OPERATION_FAILED,
        "table": table_json(table),
        "operation": {
            "id": operation.id,
            "action": operation.action.value,
            "instant": operation.instant,
            "status": operation.status.value,
            "queue": operation.queue,
            "owner": operation.owner,
        },
        "attempts": [_attempt_json(a) for a in attempts],
        "last_error": trim(operation.last_error),
        "raised_at": _iso(_raised_at(session, now)),
    }
    return raise_alert(
        session,
        kind=OPERATION_FAILED,
        tbl_id=table.id,
        operation_id=operation.id,
        payload=payload,
        dedupe_key=f"{OPERATION_FAILED}:{operation.id}:{cycle}",
        now=now,
    )


def raise_silent_tables(
    session: Session,
    *,
    timeout_seconds: float,
    silent_timeouts: int,
    limit: int = 100,
    now: datetime | None = None,
) -> list[Alert]:
    """One table_silent alert for each table (not paused) that recorded no new commit,
    notified or pulled, for `silent_timeouts` notification timeouts (its policy's
    `notification_timeout_seconds` when that is a number, else `timeout_seconds`; 0 means
    never silent), counted from its registration when it never had one. The key names the
    last commit seen, so a table alerts once per silence: again only after it spoke and
    fell silent again. Tables alerted for this silence are skipped in the query, so each
    call looks only at new ones, `limit` at most."""
    policy_timeout = Tbl.policy["notification_timeout_seconds"]
    timeout = case(
        (func.jsonb_typeof(policy_timeout) == "number", cast(policy_timeout.astext, Numeric)),
        else_=literal(timeout_seconds, Numeric),
    )
    since = func.coalesce(Tbl.last_commit_seen_at, Tbl.created_at)
    silent = extract("epoch", _clock(now) - since)
    last_seen = func.to_char(
        func.timezone("UTC", Tbl.last_commit_seen_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'
    )
    key = (
        literal(f"{TABLE_SILENT}:")
        + cast(Tbl.id, Text)
        + literal(":")
        + func.coalesce(last_seen, literal("never"))
    )
    rows = session.execute(
        select(Tbl, timeout.label("timeout"), silent.label("silent"), key.label("key"))
        .where(
            Tbl.paused.is_(False),
            timeout > 0,
            silent > timeout * silent_timeouts,
            ~exists().where(Alert.dedupe_key == key),
        )
        .order_by(since, Tbl.id)
        .limit(limit)
    ).all()
    raised_at = _iso(_raised_at(session, now))
    alerts = []
    for table, timeout_value, silent_value, dedupe_key in rows:
        payload = {
            "kind": TABLE_SILENT,
            "table": table_json(table),
            "last_commit_seen_at": _iso(table.last_commit_seen_at),
            "last_notification_at": _iso(table.last_notification_at),
            "last_pulled_at": _iso(table.last_pulled_at),
            "silent_seconds": round(float(silent_value), 3),
            "timeout_seconds": float(timeout_value),
            "raised_at": raised_at,
        }
        alert = raise_alert(
            session,
            kind=TABLE_SILENT,
            tbl_id=table.id,
            operation_id=None,
            payload=payload,
            dedupe_key=dedupe_key,
            now=now,
        )
        if alert is not None:
            alerts.append(alert)
    return alerts


def claim_due_alerts(
    session: Session, *, limit: int, lease_seconds: float, now: datetime | None = None
) -> list[Alert]:
    """Take up to `limit` due PENDING alerts, oldest due first, and move them `lease_seconds`
    ahead so no other instance takes them while this one tries (rows another transaction
    holds are skipped). Commit at once, then deliver and `record_delivery`."""
    due = (
        select(Alert.id)
        .where(Alert.status == AlertStatus.PENDING, Alert.next_attempt_at <= _clock(now))
        .order_by(Alert.next_attempt_at, Alert.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .cte("due")
    )
    stmt = (
        update(Alert)
        .where(Alert.id == due.c.id)
        .values(next_attempt_at=_clock(now) + literal(timedelta(seconds=lease_seconds)))
        .returning(Alert)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    return sorted(session.scalars(stmt), key=lambda a: (a.created_at, a.id))


def record_delivery(
    session: Session,
    alert: Alert,
    *,
    status: AlertStatus,
    error: str | None,
    retry_in: timedelta | None = None,
    now: datetime | None = None,
) -> Alert | None:
    """Record the try of a claimed `alert` (as claimed: its `deliveries` then) as `tms.alerts`
    decided it: its `status` (DELIVERED stamps `delivered_at`), the webhook's `error`, and
    for a PENDING one the delay to its next try. None when another claim recorded a try
    since (this one's lease had run out)."""
    values: dict[str, Any] = {"deliveries": alert.deliveries + 1, "status": status}
    if status is AlertStatus.DELIVERED:
        values["delivered_at"] = _clock(now)
    if error is not None:
        values["last_error"] = trim(error)
    if retry_in is not None:
        values["next_attempt_at"] = _clock(now) + literal(retry_in)
    stmt = (
        update(Alert)
        .where(
            Alert.id == alert.id,
            Alert.status == AlertStatus.PENDING,
            Alert.deliveries == alert.deliveries,
        )
        .values(**values)
        .returning(Alert)
        .execution_options(populate_existing=True, synchronize_session=False)
    )
    return session.scalars(stmt).one_or_none()


def alerts_of_operation(session: Session, operation_id: int) -> list[Alert]:
    """Oldest first."""
    return list(
        session.scalars(select(Alert).where(Alert.operation_id == operation_id).order_by(Alert.id))
    )


def list_alerts(
    session: Session,
    *,
    status: AlertStatus | Collection[AlertStatus] | None = None,
    kind: str | Sequence[str] | None = None,
    tbl_id: int | None = None,
    limit: int = 50,
    before_id: int | None = None,
) -> list[Alert]:
    """Newest first (id descending): pass the last id of a page as `before_id` for the next."""
    stmt = select(Alert)
    if isinstance(status, AlertStatus):
        stmt = stmt.where(Alert.status == status)
    elif status is not None:
        stmt = stmt.where(Alert.status.in_(list(status)))
    if isinstance(kind, str):
        stmt = stmt.where(Alert.kind == kind)
    elif kind is not None:
        stmt = stmt.where(Alert.kind.in_(list(kind)))
    if tbl_id is not None:
        stmt = stmt.where(Alert.tbl_id == tbl_id)
    if before_id is not None:
        stmt = stmt.where(Alert.id < before_id)
    return list(session.scalars(stmt.order_by(Alert.id.desc()).limit(limit)))
