"""Trigger policies: the pure decision, then `apply_triggers` in a real transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy.orm import Session

from tests.api.helpers import register
from tests.policies.tables import NOW
from tests.policies.tables import table as counted_table
from tests.store.helpers import make_table, record
from tms.application import apply_triggers
from tms.config import load_settings
from tms.policies import Thresholds, due_triggers, thresholds_for
from tms.policies.triggers import policy_params
from tms.store import (
    CommitIn,
    CountedTable,
    OperationStatus,
    ServiceAction,
    TableType,
    Tbl,
    list_events,
    list_operations,
    record_commits,
)

if TYPE_CHECKING:
    from starlette.testclient import TestClient

DEFAULTS = Thresholds(compaction_delta_commits=5, clean_commits=10, clustering_commits=0)
ALL = (ServiceAction.COMPACTION, ServiceAction.CLEAN, ServiceAction.CLUSTERING)


def decide(
    counters: tuple[int, ...],
    *,
    table_type: TableType | None = TableType.MERGE_ON_READ,
    enabled: tuple[ServiceAction, ...] = (ServiceAction.COMPACTION, ServiceAction.CLEAN),
    paused: bool = False,
    thresholds: Thresholds = DEFAULTS,
    pending: tuple[ServiceAction, ...] = (),
) -> list[ServiceAction]:
    """The actions the count thresholds make due for a table with no policy of its own, with
    `counters` (delta commits since compaction, commits since clean, since clustering and,
    if given, since metadata table compaction, delta commits since log compaction and commits
    since archival)."""
    compaction, clean, clustering, *more = counters
    metadata, log_compaction, archival = (*more, 0, 0, 0)[:3]
    counted = counted_table(
        table_type=table_type,
        enabled_actions=list(enabled),
        paused=paused,
        delta_commits_since_compaction=compaction,
        commits_since_clean=clean,
        commits_since_clustering=clustering,
        commits_since_metadata_compaction=metadata,
        delta_commits_since_log_compaction=log_compaction,
        commits_since_archival=archival,
        pending_actions=frozenset(pending),
    )
    return [t.action for t in due_triggers(counted, thresholds, NOW)]


@pytest.mark.parametrize(
    ("counters", "expected"),
    [
        ((4, 4, 4), []),
        ((5, 5, 5), [ServiceAction.COMPACTION]),
        ((6, 9, 9), [ServiceAction.COMPACTION]),
        ((0, 10, 10), [ServiceAction.CLEAN]),
        ((5, 10, 10), [ServiceAction.COMPACTION, ServiceAction.CLEAN]),
    ],
)
def test_thresholds_are_inclusive(
    counters: tuple[int, int, int], expected: list[ServiceAction]
) -> None:
    assert decide(counters) == expected


def test_compaction_only_for_merge_on_read() -> None:
    assert decide((9, 0, 0), table_type=TableType.COPY_ON_WRITE) == []
    # Only merge-on-read tables make delta commits: an unknown type with some counts as one.
    assert decide((9, 0, 0), table_type=None) == [ServiceAction.COMPACTION]


def test_paused_disabled_and_pending_actions_are_skipped() -> None:
    assert decide((9, 20, 20), paused=True) == []
    assert decide((9, 20, 20), enabled=(ServiceAction.CLEAN,)) == [ServiceAction.CLEAN]
    assert decide((9, 20, 20), pending=(ServiceAction.COMPACTION,)) == [ServiceAction.CLEAN]


def test_clustering_needs_enabling_and_a_threshold() -> None:
    with_clustering = Thresholds(5, 10, 3)
    assert decide((0, 0, 3), thresholds=with_clustering) == []  # not enabled
    assert decide((0, 0, 3), enabled=ALL) == []  # enabled, threshold 0 = off
    assert decide((0, 0, 3), enabled=ALL, thresholds=with_clustering) == [ServiceAction.CLUSTERING]


def test_zero_threshold_turns_an_action_off() -> None:
    assert decide((50, 50, 50), thresholds=Thresholds(0, 0, 0), enabled=ALL) == []


def test_table_overrides_win_and_bad_values_are_ignored() -> None:
    merged = thresholds_for({"compaction_delta_commits": 2, "clean_commits": True}, DEFAULTS)
    assert merged == Thresholds(2, 10, 0)
    assert thresholds_for({}, DEFAULTS) == DEFAULTS


def _commits(session: Session, table: Tbl, numbers: range) -> CountedTable:
    counted = None
    for n in numbers:
        counted = record(session, table.id, f"2026010100000000{n}", "deltacommit")
    assert counted is not None
    return counted


def test_apply_triggers_creates_once_and_resets_the_counter(session: Session) -> None:
    settings = load_settings(config_file=False, environ={})
    table = make_table(session, table_type=TableType.MERGE_ON_READ)
    counted = _commits(session, table, range(5))
    created = apply_triggers(session, [counted], settings)[table.id]
    assert [op.action for op in created] == [ServiceAction.COMPACTION]
    assert created[0].instant is None and created[0].status is OperationStatus.SCHEDULED
    session.refresh(table)
    assert table.delta_commits_since_compaction == 0
    assert table.commits_since_clean == 5
    # Counting on while the compaction is pending creates no second one.
    counted = _commits(session, table, range(5, 10))
    second = apply_triggers(session, [counted], settings)[table.id]
    assert [op.action for op in second] == [ServiceAction.CLEAN]
    ops = list_operations(session, tbl_id=table.id)
    assert sorted(op.action for op in ops) == [ServiceAction.CLEAN, ServiceAction.COMPACTION]
    assert apply_triggers(session, [counted], settings) == {}


def test_apply_triggers_decides_for_many_tables_at_once(session: Session) -> None:
    settings = load_settings(config_file=False, environ={})
    tables = [make_table(session, f"t{i}", table_type=TableType.MERGE_ON_READ) for i in range(3)]
    counted = [_commits(session, t, range(n)) for t, n in zip(tables, (5, 4, 6), strict=True)]
    created = apply_triggers(session, counted, settings)
    assert sorted(created) == [tables[0].id, tables[2].id]
    assert all([op.action for op in ops] == [ServiceAction.COMPACTION] for ops in created.values())


def test_policy_made_operations_carry_the_tables_planning_parameters(session: Session) -> None:
    settings = load_settings(config_file=False, environ={})
    policy = {
        "clean_commits": 2,
        "clean_policy": "KEEP_LATEST_FILE_VERSIONS",
        "clean_retained": 1,
        "compaction_delta_commits": 2,
        "compaction_strategy": "log-size",
    }
    table = make_table(session, table_type=TableType.MERGE_ON_READ, policy=policy)
    counted = _commits(session, table, range(2))
    created = {op.action: op for op in apply_triggers(session, [counted], settings)[table.id]}
    assert created[ServiceAction.CLEAN].extra_params == {
        "policy": "KEEP_LATEST_FILE_VERSIONS",
        "retained": 1,
    }
    assert created[ServiceAction.COMPACTION].extra_params == {"strategy": "log-size"}
    assert policy_params({}, ServiceAction.CLEAN) == {}


def test_a_policy_made_log_compaction_carries_the_tables_blocks_threshold(
    session: Session,
) -> None:
    settings = load_settings(config_file=False, environ={})
    policy = {"log_compaction_delta_commits": 2, "log_compaction_blocks_threshold": 3}
    table = make_table(
        session,
        table_type=TableType.MERGE_ON_READ,
        policy=policy,
        enabled_actions=[ServiceAction.LOG_COMPACTION],
    )
    assert apply_triggers(session, [_commits(session, table, range(1))], settings) == {}
    counted = _commits(session, table, range(1, 2))
    created = apply_triggers(session, [counted], settings)[table.id]
    assert [op.action for op in created] == [ServiceAction.LOG_COMPACTION]
    assert created[0].extra_params == {"log_blocks_threshold": 3}


MDT = Thresholds(0, 0, 0, metadata_compaction_delta_commits=10)


def test_metadata_compaction_after_its_delta_commits() -> None:
    on = (ServiceAction.METADATA_COMPACTION,)
    cow = TableType.COPY_ON_WRITE  # every table has delta commits on its metadata table
    assert decide((0, 0, 0, 9), table_type=cow, enabled=on, thresholds=MDT) == []
    assert decide((0, 0, 0, 10), table_type=cow, enabled=on, thresholds=MDT) == list(on)
    assert decide((0, 0, 0, 10), enabled=on, thresholds=Thresholds(0, 0, 0, 0)) == []  # off
    assert decide((0, 0, 0, 10), enabled=on, thresholds=MDT, pending=on) == []
    assert decide((0, 0, 0, 10), thresholds=MDT) == []  # not enabled (the default)


def test_stored_commits_of_every_action_trigger_one_metadata_compaction(
    session: Session,
) -> None:
    settings = load_settings(config_file=False, environ={})
    table = make_table(
        session,
        table_type=TableType.MERGE_ON_READ,
        enabled_actions=[ServiceAction.METADATA_COMPACTION],
    )
    # Writes and table services alike each make one metadata table delta commit.
    actions = ["deltacommit"] * 6 + ["compaction", "clean", "rollback", "deltacommit"]
    commits = [CommitIn(table.id, f"2026010100000{n:04d}", a) for n, a in enumerate(actions)]
    nine = record_commits(session, commits[:9]).tables[table.id]
    assert nine.commits_since_metadata_compaction == 9
    assert apply_triggers(session, [nine], settings) == {}
    ten = record_commits(session, commits[9:]).tables[table.id]
    created = apply_triggers(session, [ten], settings)[table.id]
    assert [op.action for op in created] == [ServiceAction.METADATA_COMPACTION]
    session.refresh(table)
    assert table.commits_since_metadata_compaction == 0
    assert [op.action for op in list_operations(session, tbl_id=table.id)] == [
        ServiceAction.METADATA_COMPACTION
    ]


LOG = Thresholds(0, 0, 0, log_compaction_delta_commits=4)


def test_log_compaction_after_its_delta_commits() -> None:
    on = (ServiceAction.LOG_COMPACTION,)
    assert decide((0, 0, 0, 0, 3), enabled=on, thresholds=LOG) == []
    assert decide((0, 0, 0, 0, 4), enabled=on, thresholds=LOG) == list(on)
    assert decide((0, 0, 0, 0, 4), enabled=on, thresholds=Thresholds(0, 0, 0, 0, 0)) == []  # off
    assert decide((0, 0, 0, 0, 4), enabled=on, thresholds=LOG, pending=on) == []
    cow = TableType.COPY_ON_WRITE
    assert decide((0, 0, 0, 0, 4), enabled=on, thresholds=LOG, table_type=cow) == []
    assert decide((0, 0, 0, 0, 4), thresholds=LOG) == []  # not enabled (the default)
    assert decide((4, 0, 0, 0, 0), enabled=on, thresholds=LOG) == []  # compaction's counter


def test_stored_delta_commits_trigger_a_log_compaction_and_it_restarts_its_counter(
    session: Session,
) -> None:
    settings = load_settings(config_file=False, environ={"TMS_LOG_COMPACTION_DELTA_COMMITS": "3"})
    table = make_table(
        session,
        table_type=TableType.MERGE_ON_READ,
        enabled_actions=[ServiceAction.LOG_COMPACTION, ServiceAction.COMPACTION],
        policy={"compaction_delta_commits": 100},
    )
    two = _commits(session, table, range(2))
    assert two.delta_commits_since_log_compaction == 2
    assert apply_triggers(session, [two], settings) == {}
    three = _commits(session, table, range(2, 3))
    created = apply_triggers(session, [three], settings)[table.id]
    assert [op.action for op in created] == [ServiceAction.LOG_COMPACTION]
    (event,) = list_events(session, created[0].id)
    assert event.reason == (
        "policy: 3 delta commits since the last log compaction or compaction (threshold 3)"
    )
    session.refresh(table)
    assert table.delta_commits_since_log_compaction == 0
    assert table.delta_commits_since_compaction == 3  # compaction's counter is its own
    # Counting on while it is pending creates no second one.
    counted = _commits(session, table, range(3, 6))
    assert counted.delta_commits_since_log_compaction == 3
    assert apply_triggers(session, [counted], settings) == {}
    assert [op.action for op in list_operations(session, tbl_id=table.id)] == [
        ServiceAction.LOG_COMPACTION
    ]


def test_no_policy_ever_creates_an_index_operation() -> None:
    """An index is built only on request: with every action enabled, every threshold at 1
    and every counter far past it, the policies create every other action, never indexing."""
    every = tuple(ServiceAction)
    due = decide(
        (1000, 1000, 1000, 1000, 1000, 1000),
        enabled=every,
        thresholds=Thresholds(
            1,
            1,
            1,
            metadata_compaction_delta_commits=1,
            log_compaction_delta_commits=1,
            archival_commits=1,
        ),
    )
    # a partition TTL only for a table whose policy sets its ttl_days (this one does not)
    assert set(due) == set(every) - {ServiceAction.INDEXING, ServiceAction.PARTITION_TTL}


TABLE = {"db_name": "lake", "table_name": "other", "base_path": "/data/lake/other"}
TRIGGERS = {
    "compaction": {"any": [{"delta_commits": 5}, {"elapsed_hours": 24}, {"log_bytes": 1 << 30}]},
    "clustering": {"all": [{"small_files": 10}, {"commits": 4}]},
    "clean": {"elapsed_hours": 12},
}


def test_a_tables_trigger_spec_is_stored_and_returned(client: TestClient) -> None:
    policy = {"clean_retained": 2, "triggers": TRIGGERS}
    table = register(client, policy=policy)
    assert table["policy"] == policy
    assert client.get(f"/v1/tables/{table['id']}").json()["policy"] == policy
    changed = {"triggers": {"metadata-compaction": {"delta_commits": 20}}}
    patched = client.patch(f"/v1/tables/{table['id']}", json={"policy": changed})
    assert patched.status_code == 200, patched.text
    assert patched.json()["policy"] == changed


@pytest.mark.parametrize(
    ("triggers", "field", "words"),
    [
        (
            {"compaction": {"any": [{"delta_commits": 5}, {"elapsed_hours": -1}]}},
            "body.policy.triggers.compaction.any.1.elapsed_hours",
            "expected a number of hours from 0 to 100000 (0 = off) (got -1)",
        ),
        (
            {"clustering": {"log_bytes": 1000}},
            "body.policy.triggers.clustering.log_bytes",
            "log_bytes does not apply to clustering (only compaction)",
        ),
        (
            {"compact": {"delta_commits": 5}},
            "body.policy.triggers",
            "unknown action 'compact'; expected one of compaction, logcompaction, clustering, "
            "clean, metadata-compaction",
        ),
        (
            {"clean": {"any": [{"commits": 3, "elapsed_hours": 1}]}},
            "body.policy.triggers.clean.any.0",
            "expected an object with one key",
        ),
        (
            {"clean": {"commits": 3}},
            "body.policy.triggers.clean",
            "set either clean_commits or triggers.clean, not both",
        ),
        ("often", "body.policy.triggers", "valid dictionary"),
        (
            {"compaction": {"auto": {"max_log_files_per_slice": 2.5}}},
            "body.policy.triggers.compaction.auto.max_log_files_per_slice",
            "expected a whole number of log files per slice from 0 to 100000 (0 = off)",
        ),
        (
            {"clustering": {"auto": {"max_small_file_share": 1.5}}},
            "body.policy.triggers.clustering.auto.max_small_file_share",
            "expected a number of small files per base file from 0 to 1 (0 = off)",
        ),
        (
            {"compaction": {"auto": {"max_log_files": 6}}},
            "body.policy.triggers.compaction.auto",
            "unknown target 'max_log_files'; expected one of max_log_files_per_slice",
        ),
        (
            {"compaction": {"auto": 6}},
            "body.policy.triggers.compaction.auto",
            "expected an object of targets",
        ),
        (
            {"metadata-compaction": {"auto": {}}},
            "body.policy.triggers.metadata-compaction.auto",
            "auto does not apply to metadata-compaction",
        ),
    ],
)
def test_a_bad_trigger_spec_is_a_422_naming_the_value_at_fault(
    client: TestClient, triggers: Any, field: str, words: str
) -> None:
    policy = {"clean_commits": 5, "triggers": triggers}
    for response in (
        client.post("/v1/tables", json={**TABLE, "policy": policy}),
        client.patch(f"/v1/tables/{register(client)['id']}", json={"policy": policy}),
    ):
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "validation_error"
        assert error["field"] == field
        assert words in error["message"], error["message"]


def test_a_log_compaction_threshold_or_trigger_spec_is_accepted_but_not_both(
    client: TestClient,
) -> None:
    table_id = register(client)["id"]
    spec = {"triggers": {"logcompaction": {"delta_commits": 8}}}
    for policy in ({"log_compaction_delta_commits": 3}, spec):
        patched = client.patch(f"/v1/tables/{table_id}", json={"policy": policy})
        assert patched.status_code == 200, patched.text
        assert patched.json()["policy"] == policy
    # A triggers entry replaces the count key, which the thresholds then show as the setting's.
    assert patched.json()["thresholds"]["log_compaction_delta_commits"] == 0
    both = {"log_compaction_delta_commits": 3, **spec}
    response = client.patch(f"/v1/tables/{table_id}", json={"policy": both})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "body.policy.triggers.logcompaction"
    assert "set either log_compaction_delta_commits or triggers.logcompaction" in error["message"]
