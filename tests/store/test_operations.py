from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import claim, db_now, make_op, make_table
from tms.store import (
    NotFound,
    OperationConflict,
    OperationStatus,
    ServiceAction,
    TransitionRefused,
    complete_operation,
    count_operations,
    get_operation,
    list_events,
    list_operations,
    queue_depth,
    remove_operation,
    set_operation_instant,
    submit_operation,
)

S = OperationStatus


def test_submit_is_idempotent_per_instant(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        table = make_table(session, queue="etl", priority=3)
    results = []
    for _ in range(2):
        with factory.begin() as session:
            results.append(
                submit_operation(
                    session,
                    tbl_id=table.id,
                    action=ServiceAction.COMPACTION,
                    instant="20250101000000001",
                )
            )
    first, again = results
    assert first.created and not again.created
    assert again.operation.id == first.operation.id
    op = first.operation
    assert (op.status, op.queue, op.priority, op.run_times) == (S.SCHEDULED, "etl", 3, 0)
    assert (op.engine, op.max_retries, op.retry_on_error, op.extra_params) == ("spark", 3, True, {})
    with factory.begin() as session:
        other = submit_operation(
            session, tbl_id=table.id, action=ServiceAction.CLEAN, instant="20250101000000001"
        )
        assert other.created  # same instant, other action: another operation
        events = list_events(session, op.id)
    assert [(e.from_status, e.to_status, e.reason) for e in events] == [
        (None, S.SCHEDULED, "submitted")
    ]


def test_submit_without_instant_keeps_one_pending(session: Session) -> None:
    table = make_table(session)
    first = submit_operation(session, tbl_id=table.id, action=ServiceAction.CLEAN)
    again = submit_operation(session, tbl_id=table.id, action=ServiceAction.CLEAN)
    assert first.created and not again.created and again.operation.id == first.operation.id
    other = submit_operation(session, tbl_id=table.id, action=ServiceAction.COMPACTION)
    assert other.created

    (claimed,) = [c for c in claim(session) if c.operation.id == first.operation.id]
    assert not submit_operation(session, tbl_id=table.id, action=ServiceAction.CLEAN).created
    set_operation_instant(session, first.operation.id, "20250101000000007")
    complete_operation(session, claimed.attempt)
    # The earlier one planned itself and finished: a new plan-less one may be submitted.
    assert submit_operation(session, tbl_id=table.id, action=ServiceAction.CLEAN).created


def test_set_instant_conflicts(session: Session) -> None:
    table = make_table(session)
    make_op(session, table, ServiceAction.CLEAN, at="20250101000000001")
    pending = make_op(session, table, ServiceAction.CLEAN, at=None)
    with pytest.raises(OperationConflict):
        set_operation_instant(session, pending.id, "20250101000000001")
    # The savepoint kept the transaction usable.
    assert set_operation_instant(session, pending.id, "20250101000000002").instant == (
        "20250101000000002"
    )
    assert set_operation_instant(session, pending.id, "20250101000000002").id == pending.id
    with pytest.raises(TransitionRefused, match="instant is 20250101000000002"):
        set_operation_instant(session, pending.id, "20250101000000003")


def test_submit_options_and_unknown_table(session: Session) -> None:
    table = make_table(session)
    op = make_op(
        session,
        table,
        ServiceAction.CLUSTERING,
        owner="bob",
        queue="adhoc",
        priority=9,
        resource="4g:4g",
        parallelism=8,
        extra_params={"spark.executor.cores": "2"},
        retry_on_error=False,
        max_retries=0,
        cancellable=False,
        run_at=timedelta(minutes=5),
    )
    assert (op.owner, op.queue, op.priority, op.resource, op.parallelism) == (
        "bob",
        "adhoc",
        9,
        "4g:4g",
        8,
    )
    assert op.extra_params == {"spark.executor.cores": "2"}
    assert not op.retry_on_error and not op.cancellable and op.max_retries == 0
    assert op.next_run_at > db_now(session) + timedelta(minutes=4)
    with pytest.raises(NotFound):
        submit_operation(session, tbl_id=999_999, action=ServiceAction.CLEAN)
    with pytest.raises(NotFound):
        get_operation(session, 999_999)


def test_list_filters_and_keyset_pages(session: Session) -> None:
    t1, t2 = make_table(session, "a"), make_table(session, "b")
    ops = [
        make_op(session, t, a)
        for t in (t1, t2)
        for a in (ServiceAction.COMPACTION, ServiceAction.CLEAN)
    ]
    remove_operation(session, ops[3].id)

    newest_first = [o.id for o in reversed(ops[:3])]
    page = list_operations(session, limit=2)
    nxt = list_operations(session, limit=2, before_id=page[-1].id)
    assert [o.id for o in page + nxt] == newest_first
    assert [o.id for o in list_operations(session, tbl_id=t1.id)] == [ops[1].id, ops[0].id]
    assert [o.id for o in list_operations(session, action=ServiceAction.CLEAN)] == [ops[1].id]
    assert len(list_operations(session, include_deleted=True)) == 4
    assert [o.id for o in list_operations(session, status=S.CANCELLED, include_deleted=True)] == [
        ops[3].id
    ]
    assert list_operations(session, status=[S.RUNNING, S.FAILED]) == []
    assert count_operations(session) == {
        (ServiceAction.COMPACTION, S.SCHEDULED): 2,
        (ServiceAction.CLEAN, S.SCHEDULED): 1,
    }
    assert queue_depth(session) == {"default": 3}


def test_remove(session: Session) -> None:
    table = make_table(session)
    first, second = make_op(session, table), make_op(session, table, ServiceAction.CLEAN)
    claim(session)  # claims `first` only: one running operation per table
    assert get_operation(session, first.id).status is S.RUNNING
    with pytest.raises(TransitionRefused, match="cancel it first"):
        remove_operation(session, first.id)
    removed = remove_operation(session, second.id)
    assert removed.is_deleted and removed.status is S.CANCELLED
    assert remove_operation(session, second.id).is_deleted  # again: no-op
    assert [e.to_status for e in list_events(session, second.id)] == [S.SCHEDULED, S.CANCELLED]
