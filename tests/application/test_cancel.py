"""One cancel for every caller: what it changes in tms, and which plans' cancel requests it
writes on the table (here only which calls it makes: the API tests write them on tables)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import cast

from sqlalchemy.orm import Session

from tests.store.helpers import make_table
from tms.application import TableAccess, cancel, remove
from tms.hudi.locks import AdvisoryLocks
from tms.store import OperationStatus, ServiceAction, submit_operation


class Calls:
    """A `TableAccess.run` that records the storage calls instead of making them."""

    def __init__(self) -> None:
        self.made: list[partial[None]] = []

    def __call__(self, fn: Callable[[], None]) -> None:
        assert isinstance(fn, partial)
        self.made.append(fn)

    def instants(self) -> list[str]:
        """The plan instant of each call (the fourth argument of the request's writer)."""
        return [fn.args[3] for fn in self.made]


def _access(calls: Calls) -> TableAccess:
    return TableAccess(calls, 5.0, cast(AdvisoryLocks, object()))


def _operation(session: Session, action: ServiceAction, instant: str | None) -> int:
    table = make_table(session)
    return submit_operation(session, tbl_id=table.id, action=action, instant=instant).operation.id


def test_a_cancelled_plan_gets_its_request_written_once(session: Session) -> None:
    planned = _operation(session, ServiceAction.CLUSTERING, "20260101000000001")
    calls = Calls()
    (done,) = cancel(session, [planned], reason="by test", table=_access(calls))
    assert done.changed and done.operation.status is OperationStatus.CANCELLED
    assert calls.instants() == ["20260101000000001"]
    (again,) = cancel(session, [planned], reason="by test", table=_access(calls))
    assert not again.changed and len(calls.made) == 1


def test_operations_without_a_plan_on_the_table_write_nothing(session: Session) -> None:
    planless = _operation(session, ServiceAction.COMPACTION, None)
    calls = Calls()
    (done,) = cancel(session, [planless], reason="by test", table=_access(calls))
    assert done.operation.status is OperationStatus.CANCELLED and calls.made == []


def test_the_cancel_scan_writes_no_request_a_writer_wrote(session: Session) -> None:
    planned = _operation(session, ServiceAction.COMPACTION, "20260101000000002")
    (done,) = cancel(session, [planned], reason="a writer asked", table=None)
    assert done.changed and done.operation.status is OperationStatus.CANCELLED


def test_remove_cancels_a_scheduled_plan_as_a_cancel_does(session: Session) -> None:
    planned = _operation(session, ServiceAction.COMPACTION, "20260101000000003")
    calls = Calls()
    removed = remove(session, planned, reason="by test", table=_access(calls))
    assert removed.is_deleted and removed.status is OperationStatus.CANCELLED
    assert calls.instants() == ["20260101000000003"]
    remove(session, planned, reason="by test", table=_access(calls))
    assert len(calls.made) == 1
