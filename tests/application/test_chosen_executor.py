"""The executor operations are made with: the request's, else the table policy's `executor`,
else `TMS_EXECUTOR`; the same for operations the policies make due."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.orm import Session

from tests.store.helpers import make_table, record
from tms.application import SubmitRequest, apply_triggers, check_request, submit
from tms.application.chosen_executor import chosen_executor
from tms.config import Settings, load_settings
from tms.executor_choice import ExecutorChoice
from tms.store import ServiceAction, TableType


def _settings(**overrides: Any) -> Settings:
    return load_settings(config_file=False, environ={}, **overrides)


@pytest.mark.parametrize(
    ("asked", "policy", "setting", "chosen"),
    [
        ("native", {"executor": "hudi"}, "hudi", "native"),
        (None, {"executor": "hudi"}, "native", "hudi"),
        (None, {}, "native", "native"),
        (None, None, "auto", "auto"),
        (None, {"executor": "bogus"}, "hudi", "hudi"),  # never set through the API
    ],
)
def test_the_request_then_the_policy_then_the_setting(
    asked: ExecutorChoice | None,
    policy: dict[str, Any] | None,
    setting: str,
    chosen: str,
) -> None:
    assert chosen_executor(asked, policy, _settings(executor=setting)) == chosen


@pytest.mark.parametrize(
    ("policy", "setting", "expected"),
    [({"executor": "hudi"}, "native", "hudi"), ({}, "native", "native"), ({}, "auto", "auto")],
)
def test_policy_made_operations_take_the_policy_else_the_setting(
    session: Session, policy: dict[str, Any], setting: str, expected: str
) -> None:
    table = make_table(
        session,
        table_type=TableType.MERGE_ON_READ,
        policy={**policy, "compaction_delta_commits": 1},
    )
    counted = record(session, table.id, "20260101000000001", "deltacommit")
    assert counted is not None
    (operation,) = apply_triggers(session, [counted], _settings(executor=setting))[table.id]
    assert (operation.action, operation.executor) == (ServiceAction.COMPACTION, expected)


def test_a_submit_stores_what_it_resolved(session: Session) -> None:
    settings = _settings(executor="native")
    table = make_table(session, table_type=TableType.MERGE_ON_READ, policy={"executor": "hudi"})
    session.commit()
    asked = SubmitRequest(action=ServiceAction.CLEAN, executor="native")
    (one,) = submit(session, table, check_request(asked, settings), settings)
    unasked = SubmitRequest(action=ServiceAction.COMPACTION)
    (other,) = submit(session, table, check_request(unasked, settings), settings)
    assert (one.operation.executor, other.operation.executor) == ("native", "hudi")
