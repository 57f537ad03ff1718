"""One list of table-service actions: the registry, the job's parameters and the store's
`Action` enum follow `tms.hudi.actions.TABLE_SERVICE_ACTIONS`."""

from __future__ import annotations

import inspect

import pytest

from tms.executor_choice import HUDI, NATIVE
from tms.hudi.actions import ARCHIVAL, COMPACTION, PARTITION_TTL, TABLE_SERVICE_ACTIONS
from tms.services.registry import SERVICES, table_service
from tms.store.models import ServiceAction


def test_the_registry_has_one_entry_per_table_service_action_in_order() -> None:
    assert tuple(SERVICES) == TABLE_SERVICE_ACTIONS
    assert all(SERVICES[action].action == action for action in TABLE_SERVICE_ACTIONS)


def test_the_stored_action_enum_holds_every_table_service_action() -> None:
    stored = [action.value for action in ServiceAction]
    assert stored[: len(TABLE_SERVICE_ACTIONS)] == list(TABLE_SERVICE_ACTIONS)
    assert set(stored) == set(TABLE_SERVICE_ACTIONS)


@pytest.mark.parametrize("action", TABLE_SERVICE_ACTIONS)
def test_every_planning_parameter_is_a_keyword_argument_of_the_planner(action: str) -> None:
    """`tms.planning`'s one table names the planner's arguments: a name the planner does
    not take would fail every plan of the action. The parameter asking for direct work
    (an index's drop) goes to that work instead, with the others; a service with no plans
    (archival) gives every one to its direct work."""
    service = table_service(action)
    direct = service.direct_work
    flag = {direct.flag} if direct is not None and direct.flag is not None else set()
    if service.planner is not None:
        accepted = inspect.signature(service.planner).parameters
        assert set(service.planning_params) - flag <= set(accepted)
    else:
        assert direct is not None and direct.flag is None
    if direct is not None:
        assert set(service.planning_params) - flag <= set(inspect.signature(direct.run).parameters)


def test_an_unknown_action_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'archive'"):
        table_service("archive")


def test_every_service_runs_its_plans_through_its_executors_and_refuses_unknown_ones() -> None:
    for service in SERVICES.values():
        # a service with no plans does all its work directly (archival: Hudi's archiver)
        assert service.executors or (service.planner is None and service.direct_work)
        assert all(callable(executor.execute) for executor in service.executors.values())
        with pytest.raises(ValueError, match="no executor 'elsewhere'"):
            service.executor("elsewhere")
    assert NATIVE in table_service(COMPACTION).executors


def test_archival_is_direct_work_of_hudis_code_on_spark() -> None:
    service = table_service(ARCHIVAL)
    assert service.planning_params == ("keep_min", "keep_max")
    assert service.asks_direct_work({}) and service.asks_direct_work(None)
    assert service.direct_work is not None and service.direct_work.on_spark
    assert service.pending_plans is not None
    with pytest.raises(ValueError, match="archival asked for work without a plan"):
        service.schedule(None, {})  # type: ignore[arg-type]


def test_partition_ttl_is_planned_by_tms_and_run_by_hudis_code_alone() -> None:
    service = table_service(PARTITION_TTL)
    assert service.planning_params == ("ttl_days", "ttl_partitions", "ttl_max_partitions")
    assert set(service.executors) == {HUDI} and service.direct_work is None
    assert service.plans_under_table_lock is True and service.checks_data_table is False
