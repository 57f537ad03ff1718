"""An operation's executor in the store: migration 0012 gives existing operations `auto`,
the database refuses any other name, a cancelled operation's retry keeps its choice, and a
job's report of who ran is kept (the latest one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from tests.db_fixtures import PgServer, database_at
from tests.store.helpers import make_op, make_table
from tms.store import (
    ServiceAction,
    cancel_scheduled,
    get_operation,
    record_executor_report,
    resubmit_cancelled,
    submit_operation,
    upgrade,
)
from tms.store.executor_report import MAX_DECLINED_CHARS


@pytest.fixture
def at_0011(pg_server: PgServer) -> Iterator[str]:
    """A database migrated to 0011: operations without an executor."""
    with database_at(pg_server, "0011", "tms_test_0011") as url:
        yield url


def test_migration_0012_gives_existing_operations_auto(at_0011: str) -> None:
    engine = create_engine(at_0011, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            tbl = conn.execute(
                text(
                    "INSERT INTO tbl (db_name, table_name, base_path) "
                    "VALUES ('lake', 'trips', '/lake/trips') RETURNING id"
                )
            ).scalar_one()
            conn.execute(
                text("INSERT INTO operation (tbl_id, action) VALUES (:tbl, 'compaction')"),
                {"tbl": tbl},
            )
        upgrade(at_0011)
        with engine.connect() as conn:
            row = conn.execute(
                text("SELECT executor, executed_by, native_declined FROM operation")
            ).one()
        assert tuple(row) == ("auto", None, None)
    finally:
        engine.dispose()


def test_the_database_refuses_other_executors(session: Session) -> None:
    table = make_table(session)
    with pytest.raises(IntegrityError, match="ck_operation_executor"):
        submit_operation(session, tbl_id=table.id, action=ServiceAction.CLEAN, executor="spark")


def test_a_cancelled_operations_retry_keeps_its_executor(session: Session) -> None:
    table = make_table(session)
    operation = make_op(session, table, ServiceAction.CLEAN, at=None, executor="hudi")
    cancelled = cancel_scheduled(session, operation.id, reason="test")
    retried = resubmit_cancelled(session, cancelled)
    assert retried.created and retried.operation.id != operation.id
    assert retried.operation.executor == "hudi"


@pytest.mark.parametrize(
    ("figures", "kept"),
    [
        (
            {"executor": "hudi", "native_declined": "  CUSTOM merge mode  "},
            ("hudi", "CUSTOM merge mode"),
        ),
        ({"executor": "native", "native_declined": None}, ("native", None)),
        ({"executor": "native", "native_declined": ""}, ("native", None)),
        ({"executor": "hudi", "native_declined": ["not", "text"]}, ("hudi", None)),
        ({"executor": "auto"}, (None, None)),
        ({"executor": 1}, (None, None)),
        ({"native_declined": "why"}, (None, None)),
        (None, (None, None)),
    ],
)
def test_a_report_names_an_executor_that_runs(
    session: Session, figures: dict[str, Any] | None, kept: tuple[str | None, str | None]
) -> None:
    operation = make_op(session, make_table(session))
    written = record_executor_report(session, operation.id, figures)
    assert written is (kept[0] is not None)
    session.expire_all()
    stored = get_operation(session, operation.id)
    assert (stored.executed_by, stored.native_declined) == kept


def test_the_latest_report_replaces_the_last_and_long_reasons_are_cut(session: Session) -> None:
    operation = make_op(session, make_table(session))
    record_executor_report(
        session, operation.id, {"executor": "hudi", "native_declined": "z" * 9000}
    )
    session.expire_all()
    declined = get_operation(session, operation.id).native_declined
    assert declined is not None and len(declined) == MAX_DECLINED_CHARS
    record_executor_report(session, operation.id, {"executor": "native"})
    record_executor_report(session, operation.id, {})  # a job that never got that far
    session.expire_all()
    stored = get_operation(session, operation.id)
    assert (stored.executed_by, stored.native_declined) == ("native", None)
