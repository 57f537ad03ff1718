from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from alembic import command
from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from tests.store.helpers import make_table, record
from tms.application import apply_triggers
from tms.config import load_settings
from tms.store import (
    Commit,
    CommitIn,
    CountedTable,
    NotFound,
    Operation,
    ServiceAction,
    TableType,
    alembic_config,
    counted_tables,
    get_table,
    list_commits,
    lock_tables_by_base_path,
    make_session_factory,
    record_commits,
    reset_counter,
    submit_operation,
    upgrade,
)


def test_record_commit_is_idempotent(factory: sessionmaker[Session]) -> None:
    with factory.begin() as session:
        table = make_table(session)
    for expected_new in (True, False):
        with factory.begin() as session:
            counted = record(session, table.id, "20250101000000001", "deltacommit", records=7)
            assert (counted is not None) is expected_new
            assert get_table(session, table.id).delta_commits_since_compaction == 1
    with factory() as session:
        assert session.scalar(select(func.count()).select_from(Commit)) == 1
        commit = list_commits(session, table.id)[0]
        assert (commit.instant, commit.action, commit.records) == (
            "20250101000000001",
            "deltacommit",
            7,
        )


def test_a_recorded_table_reads_as_counted_tables_reads_it(session: Session) -> None:
    """`record_commits` returns its counters with PostgreSQL's own RETURNING list, and the
    pull fallback reads them with `COUNTED`: both give the triggers the same table."""
    table = make_table(session)
    submit_operation(session, tbl_id=table.id, action=ServiceAction.CLEAN)
    record(session, table.id, "20250101000000001", "deltacommit", log_bytes=9, log_files=1)
    counted = record(session, table.id, "20250101000000002", "compaction")
    assert counted is not None
    assert counted_tables(session, [table.id]) == [counted]


def test_counters_follow_the_action(session: Session) -> None:
    table = make_table(session)
    actions = ["deltacommit", "deltacommit", "commit", "clean", "replacecommit"]
    for i, action in enumerate(actions):
        record(session, table.id, f"2025010100000000{i}", action)
    table = get_table(session, table.id)
    assert table.delta_commits_since_compaction == 2
    assert table.delta_commits_since_log_compaction == 2  # delta commits, as compaction's
    assert table.commits_since_clean == 1  # a clean restarts it: only 04 came after it
    assert table.last_clean_at is not None
    assert table.commits_since_clustering == 4  # the clean is no write
    assert table.last_commit_instant == "20250101000000004"
    assert table.last_notification_at is not None
    assert table.last_commit_seen_at is not None

    reset_counter(session, table.id, ServiceAction.COMPACTION)
    assert get_table(session, table.id).delta_commits_since_compaction == 0
    assert get_table(session, table.id).last_compaction_at is not None
    assert get_table(session, table.id).commits_since_clean == 1
    # A compaction leaves no log blocks for a log compaction to merge.
    assert get_table(session, table.id).delta_commits_since_log_compaction == 0


def test_a_batch_counts_each_new_commit_once(session: Session) -> None:
    one, two = make_table(session, "one"), make_table(session, "two")
    record(session, one.id, "20250101000000001", "deltacommit")
    batch = [
        CommitIn(one.id, "20250101000000001", "deltacommit"),  # stored before
        CommitIn(two.id, "20250101000000003", "commit"),
        CommitIn(one.id, "20250101000000002", "deltacommit"),
        CommitIn(two.id, "20250101000000003", "commit"),  # repeated within the batch
        CommitIn(one.id, "20250101000000004", "deltacommit", records=5, files=2, log_files=1),
    ]
    recorded = record_commits(session, batch)
    assert recorded.new == [False, True, True, False, True]
    assert sorted(recorded.tables) == [one.id, two.id]
    assert recorded.tables[one.id].delta_commits_since_compaction == 3
    assert get_table(session, one.id).last_commit_instant == "20250101000000004"
    assert recorded.tables[two.id].commits_since_clean == 1
    assert session.scalar(select(func.count()).select_from(Commit)) == 4
    newest = list_commits(session, one.id, limit=1)[0]
    assert (newest.records, newest.files, newest.log_files) == (5, 2, 1)


def test_a_writers_compaction_in_a_batch_restarts_from_the_commits_after_it(
    session: Session,
) -> None:
    table = make_table(session)
    for i in range(4):
        record(session, table.id, f"2025010100000000{i}", "deltacommit")
    recorded = record_commits(
        session,
        [
            CommitIn(table.id, "20250101000000007", "deltacommit"),
            CommitIn(table.id, "20250101000000005", "compaction"),
            CommitIn(table.id, "20250101000000004", "deltacommit"),
            CommitIn(table.id, "20250101000000006", "clustering"),
        ],
    )
    after = recorded.tables[table.id]
    assert after.delta_commits_since_compaction == 1  # only 07 is after the compaction
    assert after.delta_commits_since_log_compaction == 1
    assert after.commits_since_clustering == 1
    assert after.commits_since_clean == 6  # services do not count as writes


def test_a_compaction_heard_late_recounts_the_commits_stored_after_it(session: Session) -> None:
    """A pull brings our own compaction after the delta commits that followed it were
    notified: the counters hold what came after the compaction, not zero."""
    table = make_table(session)
    for i in (10, 20, 30):
        record(session, table.id, f"202501010000000{i}", "deltacommit")
    reset_counter(session, table.id, ServiceAction.COMPACTION)  # the trigger scheduled one
    for i in (40, 50):
        record_commits(
            session,
            [CommitIn(table.id, f"202501010000000{i}", "deltacommit", log_files=1, log_bytes=10)],
        )
    recorded = record_commits(
        session, [CommitIn(table.id, "20250101000000035", "compaction", pulled=True)]
    )
    after = recorded.tables[table.id]
    assert after.delta_commits_since_compaction == 2
    assert after.delta_commits_since_log_compaction == 2
    assert (after.log_files_since_compaction, after.log_bytes_since_compaction) == (2, 20)
    assert ServiceAction.COMPACTION in after.last_run_at
    # An older compaction heard later changes nothing: the newest one counts.
    recorded = record_commits(
        session, [CommitIn(table.id, "20250101000000015", "compaction", pulled=True)]
    )
    assert recorded.tables[table.id].delta_commits_since_compaction == 2


def test_a_log_compaction_restarts_only_its_own_counter(session: Session) -> None:
    """Scheduled by a trigger (`reset_counter`) or stored as a commit, a log compaction
    restarts the log compaction's counter; compaction's counters and clock go on."""
    table = make_table(session)

    def counters(counted: CountedTable | None) -> tuple[int, int]:
        assert counted is not None
        return counted.delta_commits_since_log_compaction, counted.delta_commits_since_compaction

    for i in (10, 20, 30, 40):
        record(session, table.id, f"202501010000000{i}", "deltacommit", log_files=1)
    reset_counter(session, table.id, ServiceAction.LOG_COMPACTION)
    stored = get_table(session, table.id)
    assert stored.delta_commits_since_log_compaction == 0
    assert (stored.delta_commits_since_compaction, stored.log_files_since_compaction) == (4, 4)
    assert stored.last_compaction_at is None
    assert counters(record(session, table.id, "20250101000000050", "deltacommit")) == (1, 5)
    assert counters(record(session, table.id, "20250101000000060", "deltacommit")) == (2, 6)
    # A log compaction on the timeline, heard after a delta commit that followed it: the
    # counter holds the delta commits after it.
    counted = record(session, table.id, "20250101000000055", "logcompaction")
    assert counters(counted) == (1, 6)
    assert counted is not None and ServiceAction.COMPACTION not in counted.last_run_at
    # An older one heard later changes nothing: the newest counts.
    assert counters(record(session, table.id, "20250101000000045", "logcompaction")) == (1, 6)
    # A compaction restarts both; the newer of a compaction and a log compaction is where
    # the log compaction's count starts.
    recorded = record_commits(
        session,
        [
            CommitIn(table.id, "20250101000000070", "compaction"),
            CommitIn(table.id, "20250101000000075", "deltacommit"),
            CommitIn(table.id, "20250101000000080", "deltacommit"),
            CommitIn(table.id, "20250101000000085", "logcompaction"),
            CommitIn(table.id, "20250101000000090", "deltacommit"),
        ],
    )
    after = recorded.tables[table.id]
    assert counters(after) == (1, 3)
    assert counted_tables(session, [table.id]) == [after]
    assert counters(record(session, table.id, "20250101000000095", "compaction")) == (0, 0)


def test_pulled_commits_are_marked_and_leave_the_notification_time_alone(
    session: Session,
) -> None:
    table = make_table(session)
    record_commits(session, [CommitIn(table.id, "20250101000000001", "commit", pulled=True)])
    table = get_table(session, table.id)
    assert table.last_notification_at is None
    assert table.last_commit_seen_at is not None
    assert list_commits(session, table.id)[0].pulled


def test_small_files_add_up_per_partition_until_a_clustering(session: Session) -> None:
    table = make_table(session)
    for i, small in enumerate([{"a": 2}, {"a": 1, "b": 4}]):
        record_commits(
            session, [CommitIn(table.id, f"2025010100000000{i}", "commit", small_files=small)]
        )
    assert get_table(session, table.id).small_files_since_clustering == {"a": 3, "b": 4}
    recorded = record_commits(
        session,
        [
            CommitIn(table.id, "20250101000000005", "clustering"),
            CommitIn(table.id, "20250101000000006", "commit", small_files={"c": 1}),
        ],
    )
    assert recorded.tables[table.id].small_files_since_clustering == {"c": 1}


def test_last_instant_never_goes_back(session: Session) -> None:
    table = make_table(session)
    record(session, table.id, "20250101000000009", "commit")
    assert record(session, table.id, "20250101000000001", "commit") is not None
    assert get_table(session, table.id).last_commit_instant == "20250101000000009"


def test_commit_for_unknown_table(session: Session) -> None:
    with pytest.raises(NotFound):
        record(session, 424242, "1", "commit")


def test_tables_are_found_by_any_spelling_of_their_base_path(session: Session) -> None:
    table = make_table(session)
    found = lock_tables_by_base_path(session, ["/data/t/", "/data/elsewhere"])
    assert list(found) == ["/data/t"]
    assert found["/data/t"].id == table.id


def test_concurrent_batches_over_the_same_tables_all_commit(
    factory: sessionmaker[Session],
) -> None:
    """Batches lock their tables in id order: overlapping ones wait, never deadlock."""
    with factory.begin() as session:
        ids = [make_table(session, f"t{i}").id for i in range(6)]

    def write(worker: int) -> None:
        for n in range(20):
            commits = [CommitIn(i, f"2025010{worker}{n:010d}", "deltacommit") for i in ids]
            with factory.begin() as session:
                lock_tables_by_base_path(session, [f"/data/t{i}" for i in range(6)][::-1])
                record_commits(session, commits[::-1] if worker % 2 else commits)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(4)))
    with factory() as session:
        assert {get_table(session, i).delta_commits_since_compaction for i in ids} == {80}


def test_list_commits_newest_first_with_keyset(session: Session) -> None:
    table = make_table(session)
    for i in range(5):
        record(session, table.id, f"2025010100000000{i}", "commit")
    page = list_commits(session, table.id, limit=2)
    nxt = list_commits(session, table.id, limit=2, before_instant=page[-1].instant)
    assert [c.instant[-1] for c in page + nxt] == ["4", "3", "2", "1"]


def test_commit_order_follows_the_table_lock_not_the_transaction_start(
    factory: sessionmaker[Session],
) -> None:
    """A batch that began before another but stored its commits after it (it waited for
    the table's lock) comes after it in the commit order: its commits are the ones the
    counter counts after the compaction the other batch created."""
    settings = load_settings(config_file=False, environ={}, compaction_delta_commits=3)
    with factory.begin() as session:
        tbl_id = make_table(session, table_type=TableType.MERGE_ON_READ).id
    late = factory()
    late.begin()
    late.execute(select(func.now()))  # its transaction (and `now()`) starts here
    with factory.begin() as session:
        lock_tables_by_base_path(session, ["/data/t"])
        commits = [CommitIn(tbl_id, f"2025010100000000{i}", "deltacommit") for i in range(3)]
        created = apply_triggers(
            session, record_commits(session, commits).tables.values(), settings
        )
        assert [op.action for op in created[tbl_id]] == [ServiceAction.COMPACTION]
    lock_tables_by_base_path(late, ["/data/t"])
    record_commits(
        late, [CommitIn(tbl_id, f"2025010100000001{i}", "deltacommit") for i in range(2)]
    )
    late.commit()
    late.close()
    with factory() as session:
        compaction = session.scalars(select(Operation)).one()
        assert get_table(session, tbl_id).delta_commits_since_compaction == 2
        after = select(Commit.instant).where(Commit.seq > compaction.commit_seq)
        assert sorted(session.scalars(after)) == ["20250101000000010", "20250101000000011"]
        # The transaction clock says otherwise: the late batch's commits look older.
        started_late = select(Commit.instant).where(Commit.received_at < compaction.created_at)
        assert len(session.scalars(started_late).all()) == 2


def test_the_commit_order_migration_numbers_existing_rows_by_time(
    engine: Engine, db_url: str
) -> None:
    """Rows stored before the upgrade get places in the order of their times, and new rows
    come after them."""
    with engine.connect() as conn:
        config = alembic_config(db_url)
        config.attributes["connection"] = conn
        command.downgrade(config, "0002")
        conn.execute(
            text(
                "INSERT INTO tbl (id, db_name, table_name, base_path) OVERRIDING SYSTEM VALUE "
                "VALUES (1, 'db', 't', '/data/t');"
                "INSERT INTO commit (tbl_id, instant, action, received_at) VALUES "
                "(1, '20250101000000001', 'deltacommit', '2025-01-01 00:00:01+00'),"
                "(1, '20250101000000003', 'deltacommit', '2025-01-01 00:00:03+00');"
                "INSERT INTO operation (tbl_id, action, created_at) "
                "VALUES (1, 'compaction', '2025-01-01 00:00:02+00')"
            )
        )
        conn.commit()
    upgrade(db_url)
    with make_session_factory(engine)() as session:
        record(session, 1, "20250101000000004", "deltacommit")
        seqs = {i: s for i, s in session.execute(select(Commit.instant, Commit.seq))}
        op_seq = session.scalars(select(Operation.commit_seq)).one()
    assert seqs["20250101000000001"] < op_seq < seqs["20250101000000003"]
    assert seqs["20250101000000004"] > seqs["20250101000000003"]


def test_the_log_compaction_counter_migration_starts_existing_tables_at_zero(
    engine: Engine, db_url: str
) -> None:
    """0015 adds the counter at 0 and to the counters' check; its downgrade takes both away."""
    with engine.connect() as conn:
        config = alembic_config(db_url)
        config.attributes["connection"] = conn
        command.downgrade(config, "0014")
        conn.execute(
            text(
                "INSERT INTO tbl (id, db_name, table_name, base_path, "
                "delta_commits_since_compaction) OVERRIDING SYSTEM VALUE "
                "VALUES (1, 'db', 't', '/data/t', 7)"
            )
        )
        conn.commit()
    upgrade(db_url)
    with make_session_factory(engine)() as session:
        stored = get_table(session, 1)
        assert stored.delta_commits_since_compaction == 7
        assert stored.delta_commits_since_log_compaction == 0
        counted = record(session, 1, "20250101000000001", "deltacommit")
        assert counted is not None and counted.delta_commits_since_log_compaction == 1
        session.commit()
    with engine.connect() as conn, pytest.raises(IntegrityError, match="ck_tbl_counters"):
        conn.execute(text("UPDATE tbl SET delta_commits_since_log_compaction = -1"))
    with engine.connect() as conn:
        config = alembic_config(db_url)
        config.attributes["connection"] = conn
        command.downgrade(config, "0014")
        conn.commit()
        columns = conn.scalars(
            text(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'tbl' AND column_name LIKE '%since%'"
            )
        ).all()
        check = conn.scalar(
            text(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conname = 'ck_tbl_counters'"
            )
        )
    assert "delta_commits_since_log_compaction" not in columns
    assert "delta_commits_since_compaction" in columns
    assert check is not None and "log_compaction" not in check
