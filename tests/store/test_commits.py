from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import make_table
from tms.store import (
    Action,
    Commit,
    NotFound,
    get_table,
    list_commits,
    record_commit,
    reset_counter,
)


def test_record_commit_is_idempotent(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        table = make_table(session)
    for expected_new in (True, False):
        with factory.begin() as session:
            recorded = record_commit(
                session, table.id, instant="20250101000000001", action="deltacommit", records=7
            )
            assert recorded.new is expected_new
            assert recorded.table.delta_commits_since_compaction == 1
    with factory() as session:
        assert session.scalar(select(func.count()).select_from(Commit)) == 1
        commit = list_commits(session, table.id)[0]
        assert (commit.instant, commit.action, commit.records) == (
            "20250101000000001",
            "deltacommit",
            7,
        )


def test_counters_follow_the_action(session: Session) -> None:
    table = make_table(session)
    for i, action in enumerate(["deltacommit", "deltacommit", "commit", "replacecommit", "clean"]):
        record_commit(session, table.id, instant=f"2025010100000000{i}", action=action)
    table = get_table(session, table.id)
    assert table.delta_commits_since_compaction == 2
    assert table.commits_since_clean == 4  # clean itself does not count
    assert table.commits_since_clustering == 4
    assert table.last_commit_instant == "20250101000000004"
    assert table.last_notification_at is not None

    reset_counter(session, table.id, Action.COMPACTION)
    assert get_table(session, table.id).delta_commits_since_compaction == 0
    assert get_table(session, table.id).commits_since_clean == 4


def test_last_instant_never_goes_back(session: Session) -> None:
    table = make_table(session)
    record_commit(session, table.id, instant="20250101000000009", action="commit")
    recorded = record_commit(session, table.id, instant="20250101000000001", action="commit")
    assert recorded.new
    assert recorded.table.last_commit_instant == "20250101000000009"


def test_commit_for_unknown_table(session: Session) -> None:
    with pytest.raises(NotFound):
        record_commit(session, 424242, instant="1", action="commit")


def test_list_commits_newest_first_with_keyset(session: Session) -> None:
    table = make_table(session)
    for i in range(5):
        record_commit(session, table.id, instant=f"2025010100000000{i}", action="commit")
    page = list_commits(session, table.id, limit=2)
    nxt = list_commits(session, table.id, limit=2, before_instant=page[-1].instant)
    assert [c.instant[-1] for c in page + nxt] == ["4", "3", "2", "1"]
