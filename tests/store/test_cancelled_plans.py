"""Cancelled operations whose plans may still be pending on the table are marked, whatever
stopped them, and hold back what would plan around those plans until the mark is cleared."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from tests.store.helpers import claim, db_now, make_op, make_table
from tms.application.attempt_end import Exited, finish_attempt, reap_expired_leases
from tms.backoff import Backoff
from tms.store import (
    OperationStatus,
    ServiceAction,
    cancel_scheduled,
    complete_operation,
    finish_cancelled,
    get_operation,
    plan_settled,
    plans_to_abort,
    remove_operation,
    request_cancel_of_running,
)

S = OperationStatus
NO_JITTER = Backoff(base_seconds=5, factor=2, max_seconds=600, jitter=0)


def _marked(session: Session) -> list[int]:
    return [operation.id for operation, _ in plans_to_abort(session, limit=100)]


def test_every_way_to_cancelled_marks_an_operation_with_a_plan(session: Session) -> None:
    tables = [make_table(session, name) for name in "abcdefg"]
    scheduled = make_op(session, tables[0], ServiceAction.CLUSTERING)
    removed = make_op(session, tables[1], ServiceAction.COMPACTION)
    reported = make_op(session, tables[2], ServiceAction.CLUSTERING)
    killed = make_op(session, tables[3], ServiceAction.CLUSTERING)
    lost = make_op(session, tables[4], ServiceAction.CLUSTERING)
    unplanned = make_op(session, tables[5], ServiceAction.CLUSTERING, at=None)
    clean = make_op(session, tables[6], ServiceAction.CLEAN)
    cancel_scheduled(session, scheduled.id, reason="cancelled by operator")
    remove_operation(session, removed.id)
    claims = {c.operation.id: c for c in claim(session, lease_seconds=10)}
    for operation in (reported, killed, lost, unplanned, clean):
        request_cancel_of_running(session, operation.id, reason="operator")  # each running job
    finish_cancelled(session, claims[reported.id].attempt, error="the job stopped")
    finish_attempt(
        session,
        claims[killed.id].attempt,
        Exited("killed by the scheduler: cancel requested", -9),
        backoff=NO_JITTER,
    )
    finish_cancelled(session, claims[unplanned.id].attempt, error="stopped while planning")
    finish_cancelled(session, claims[clean.id].attempt, error="stopped")
    reap_expired_leases(session, backoff=NO_JITTER, now=db_now(session) + timedelta(seconds=11))

    for operation in (scheduled, removed, reported, killed, lost, unplanned, clean):
        assert get_operation(session, operation.id).status is S.CANCELLED
    assert sorted(_marked(session)) == sorted(
        [scheduled.id, removed.id, reported.id, killed.id, lost.id]
    ), "a plan-less operation and a clean have no plan on the timeline to abort"


def test_a_marked_plan_holds_back_what_would_plan_until_it_is_settled(session: Session) -> None:
    table, other = make_table(session, "t"), make_table(session, "u")
    cancelled = make_op(session, table, ServiceAction.CLUSTERING)
    cancel_scheduled(session, cancelled.id, reason="cancelled by operator")
    retry = make_op(session, table, ServiceAction.CLUSTERING, at=None)  # plans anew when it runs
    compaction = make_op(session, table, ServiceAction.COMPACTION, at=None)
    elsewhere = make_op(session, other, ServiceAction.CLUSTERING, at=None)

    claims = {c.operation.id: c for c in claim(session)}
    assert set(claims) == {compaction.id, elsewhere.id}, (
        "the retry would plan around the cancelled plan's file groups"
    )
    complete_operation(session, claims[compaction.id].attempt)
    assert claim(session) == [], "held back while the mark stays"

    assert plan_settled(session, cancelled.id)
    assert not plan_settled(session, cancelled.id), "cleared once"
    assert _marked(session) == []
    assert [c.operation.id for c in claim(session)] == [retry.id]


def test_an_operation_with_its_own_plan_is_not_held_back(session: Session) -> None:
    table = make_table(session)
    cancelled = make_op(session, table, ServiceAction.CLUSTERING)
    cancel_scheduled(session, cancelled.id, reason="cancelled by operator")
    own_plan = make_op(session, table, ServiceAction.CLUSTERING)

    assert [c.operation.id for c in claim(session)] == [own_plan.id]
