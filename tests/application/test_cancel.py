"""One cancel for every caller: what it changes in tms (`cancel_operation` decides, the
store's statements apply), and which plans' cancel requests it writes on the table (here only
which calls it makes: the API tests write them on tables)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import cast

import pytest
from sqlalchemy.orm import Session

from tests.store.helpers import claim, make_op, make_table
from tms.application import TableAccess, cancel, remove
from tms.application.cancel import cancel_operation
from tms.hudi.locks import AdvisoryLocks
from tms.store import (
    NotFound,
    OperationStatus,
    ServiceAction,
    TransitionRefused,
    list_events,
    submit_operation,
)

S = OperationStatus


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


def test_a_waiting_operation_is_cancelled_and_a_running_one_asked_to_stop(
    session: Session,
) -> None:
    table, other = make_table(session, "t"), make_table(session, "u")
    scheduled = make_op(session, table)
    assert cancel_operation(session, scheduled.id).status is S.CANCELLED
    with pytest.raises(TransitionRefused, match="cannot cancel: status is CANCELLED"):
        cancel_operation(session, scheduled.id)

    running = make_op(session, other)
    stubborn = make_op(session, table, cancellable=False)
    claim(session)
    requested = cancel_operation(session, running.id, reason="operator")
    assert requested.status is S.RUNNING and requested.cancel_requested
    assert cancel_operation(session, running.id).cancel_requested  # asked once
    with pytest.raises(TransitionRefused, match=r"expected SCHEDULED \(not cancellable\)"):
        cancel_operation(session, stubborn.id)
    reasons = [e.reason or "" for e in list_events(session, running.id)]
    assert [r for r in reasons if r.startswith("cancel")] == ["cancel requested: operator"]
    with pytest.raises(NotFound):
        cancel_operation(session, 999_999)
