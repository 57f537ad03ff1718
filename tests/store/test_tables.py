from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import make_op, make_table, record
from tms.store import (
    NotFound,
    ServiceAction,
    TableBusy,
    TableConflict,
    TableType,
    claim_due_operations,
    delete_table,
    find_table,
    find_table_by_base_path,
    get_table,
    list_commits,
    list_operations,
    list_tables,
    register_table,
    update_table,
)


def test_register_creates_with_defaults(session: Session) -> None:
    registered = register_table(
        session, db_name="db", table_name="t", base_path="s3://b/t/", owner="ann"
    )
    assert registered.created
    table = registered.table
    assert (table.db_name, table.table_name, table.base_path) == ("db", "t", "s3://b/t")
    assert (table.queue, table.priority, table.paused, table.owner) == ("default", 0, False, "ann")
    assert table.enabled_actions == [ServiceAction.COMPACTION, ServiceAction.CLEAN]
    assert table.policy == {}
    assert table.created_at is not None


def test_register_is_idempotent(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        first = register_table(session, db_name="db", table_name="t", base_path="/data/t")
    with factory.begin() as session:
        again = register_table(session, db_name="db", table_name="t", base_path="/data/t/")
    assert first.created and not again.created
    assert again.table.id == first.table.id


@pytest.mark.parametrize(
    ("db_name", "table_name", "base_path", "message"),
    [
        ("db", "t", "/data/elsewhere", "registered with base path /data/t"),
        ("db", "other", "/data/t", "registered as db.t"),
    ],
)
def test_register_conflicts_are_typed(
    session: Session, db_name: str, table_name: str, base_path: str, message: str
) -> None:
    register_table(session, db_name="db", table_name="t", base_path="/data/t")
    with pytest.raises(TableConflict, match=message):
        register_table(session, db_name=db_name, table_name=table_name, base_path=base_path)


def test_a_table_is_found_under_a_spelling_through_a_symlink(
    session: Session, tmp_path: Path
) -> None:
    """Tables are stored where local paths lead; Hudi's clients (view, markers) may name
    one through a symlink, and find it."""
    real = tmp_path / "lake" / "trips"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "lake")
    table = register_table(session, db_name="db", table_name="t", base_path=str(real)).table
    assert find_table_by_base_path(session, f"{tmp_path}/link/trips") is table
    assert find_table_by_base_path(session, f"file://{tmp_path}/link//trips/") is table
    assert find_table_by_base_path(session, f"{tmp_path}/link/other") is None


def test_lookups_and_update(session: Session) -> None:
    table = make_table(session, "t", table_type=TableType.MERGE_ON_READ, table_version=6)
    assert find_table(session, db_name="db", table_name="t") is table
    assert find_table_by_base_path(session, "/data/t/") is table
    assert find_table(session, db_name="db", table_name="nope") is None
    updated = update_table(
        session,
        table.id,
        paused=True,
        enabled_actions=[ServiceAction.CLUSTERING],
        policy={"clustering_commits": 4},
    )
    assert updated.paused and updated.enabled_actions == [ServiceAction.CLUSTERING]
    assert updated.policy == {"clustering_commits": 4}
    assert updated.table_type is TableType.MERGE_ON_READ
    with pytest.raises(TypeError, match="db_name"):
        update_table(session, table.id, db_name="x")
    with pytest.raises(NotFound):
        update_table(session, 999_999, paused=True)
    with pytest.raises(NotFound):
        get_table(session, 999_999)


def test_list_tables_pages_in_id_order(session: Session) -> None:
    ids = [make_table(session, f"t{i}").id for i in range(5)]
    update_table(session, ids[1], paused=True)
    first = list_tables(session, limit=2)
    second = list_tables(session, limit=2, after_id=first[-1].id)
    rest = list_tables(session, limit=10, after_id=second[-1].id)
    assert [t.id for t in first + second + rest] == ids
    assert [t.id for t in list_tables(session, paused=True)] == [ids[1]]


def test_delete_table_removes_history_but_not_while_running(session: Session) -> None:
    busy = make_table(session, "busy")
    idle = make_table(session, "idle")
    busy_id, idle_id = busy.id, idle.id
    for table in (busy, idle):
        record(session, table.id, "1", "deltacommit")
    running = make_op(session, busy)
    make_op(session, idle, run_at=timedelta(hours=1))  # not due: stays SCHEDULED
    claimed = claim_due_operations(session, "i1", limit=5, lease_seconds=60)
    assert [c.operation.id for c in claimed] == [running.id]
    session.commit()

    with pytest.raises(TableBusy):
        delete_table(session, busy_id)
    session.rollback()

    delete_table(session, idle_id)
    session.commit()
    assert find_table(session, db_name="db", table_name="idle") is None
    assert get_table(session, busy_id).table_name == "busy"
    assert list_operations(session, tbl_id=idle_id) == []
    assert list_commits(session, idle_id) == []
    assert len(list_commits(session, busy_id)) == 1
