"""Submitting operations: RFC-43's submit, the table-service-manager client's `REQUEST`, and
the operation a cancelled one's retry makes (`tms.application.retry`).

What a request may carry is checked before anything is stored (`check_request`): `spark.*`
keys against the instance's allow-list (`tms.config.spark_conf`, checked again at launch),
every other key as a planning parameter the job knows, with a value the action can use
(`tms.planning`); an index names partitions and no plan instant. Then the table must have
something to do (no compaction of a copy-on-write table), and a second index request while
one waits to plan must be the same request. The executor is the request's, else the table
policy's, else the instance's (`chosen_executor`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from tms import observe
from tms.application.chosen_executor import chosen_executor
from tms.application.refusals import NothingToCompact, OwnPlanOnly, UnusableParams
from tms.config import Settings
from tms.config.spark_conf import allow_list, value_problems
from tms.executor_choice import ExecutorChoice
from tms.planning import BadJobInput, planning_problems, schedule_kwargs
from tms.store import (
    Operation,
    OperationConflict,
    ServiceAction,
    Submitted,
    TableType,
    Tbl,
    submit_operation,
)

__all__ = ["OWN_PLAN_ONLY", "CheckedRequest", "SubmitRequest", "check_request", "submit"]

OWN_PLAN_ONLY = (
    "an index is built only from a plan tms schedules itself, from the operation's "
    "partitions: submit them without an instant (POST /v1/hoodie/service/index/submit)"
)


@dataclass(frozen=True)
class SubmitRequest:
    """One request for operations of one action on one table: one per instant (`None`: the
    operation plans itself)."""

    action: ServiceAction
    instants: Sequence[str | None] = (None,)
    engine: str = "spark"
    executor: ExecutorChoice | None = None
    """None: the table policy's, else the instance's `executor` (`chosen_executor`)."""
    owner: str | None = None
    queue: str | None = None
    priority: int | None = None
    resource: str | None = None
    parallelism: int | None = None
    extra_params: Mapping[str, Any] = field(default_factory=dict)
    retry_on_error: bool = True
    max_retries: int | None = None
    """None: the instance's `default_max_retries`."""
    reason: str = "submitted"
    origin: str = "submit"
    """Who asked, as `tms_operations_created_total` counts it."""


@dataclass(frozen=True)
class CheckedRequest:
    """A request `check_request` let through: what `submit` takes, so that no request is
    submitted unchecked and none is checked twice."""

    request: SubmitRequest


def check_request(request: SubmitRequest, settings: Settings) -> CheckedRequest:
    """Refuse what no table could take: `OwnPlanOnly` for an index asked for other than as
    the one operation that plans itself (naming instants, or none at all), `UnusableParams`
    listing every `extra_params` key the operation cannot carry. Callers check before they
    look up or register the table, so a bad request changes nothing."""
    if request.action is ServiceAction.INDEXING and tuple(request.instants) != (None,):
        raise OwnPlanOnly(OWN_PLAN_ONLY)
    refused = allow_list(settings).refused(request.extra_params)
    problems = {key: f"{key} is not allowed: {reason}" for key, reason in refused.items()}
    problems |= value_problems(request.extra_params)
    problems |= planning_problems(request.action.value, request.extra_params)
    if problems:
        raise UnusableParams(problems)
    return CheckedRequest(request)


def submit(
    session: Session, table: Tbl, checked: CheckedRequest, settings: Settings
) -> list[Submitted]:
    """The operations the checked request asks for on `table`, created or found (the same
    request again finds what the first one made), committed; per instant, in order."""
    request = checked.request
    if request.action is ServiceAction.COMPACTION and table.table_type is TableType.COPY_ON_WRITE:
        raise NothingToCompact(f"{table.qualified_name} is COPY_ON_WRITE: nothing to compact")
    max_retries = (
        request.max_retries if request.max_retries is not None else settings.default_max_retries
    )
    executor = chosen_executor(request.executor, table.policy, settings)
    submitted: list[Submitted] = []
    for instant in request.instants:
        one = submit_operation(
            session,
            tbl_id=table.id,
            action=request.action,
            instant=instant,
            engine=request.engine,
            executor=executor,
            owner=request.owner,
            queue=request.queue,
            priority=request.priority,
            resource=request.resource,
            parallelism=request.parallelism,
            extra_params=dict(request.extra_params),
            retry_on_error=request.retry_on_error,
            max_retries=max_retries,
            reason=request.reason,
        )
        if request.action is ServiceAction.INDEXING and not one.created:
            _same_index_request(one.operation, request.extra_params)
        submitted.append(one)
    session.commit()
    observe.operations_created([s.operation for s in submitted if s.created], request.origin)
    return submitted


def _index_request(extra_params: Mapping[str, Any]) -> tuple[frozenset[str], bool]:
    kwargs = schedule_kwargs(ServiceAction.INDEXING.value, extra_params)
    return frozenset(kwargs.get("partitions", ())), bool(kwargs.get("drop", False))


def _same_index_request(pending: Operation, extra_params: Mapping[str, Any]) -> None:
    """A second index submit while one waits to plan is the same request only when it
    builds (or drops) the same partitions; another would silently do nothing."""
    try:
        same = _index_request(pending.extra_params) == _index_request(extra_params)
    except BadJobInput:  # stored before the check existed: not the same request
        same = False
    if not same:
        wanted = extra_params.get("partitions")
        raise OperationConflict(
            f"index operation {pending.id} ({pending.status}, partitions "
            f"{pending.extra_params.get('partitions')}, drop "
            f"{pending.extra_params.get('drop', 'false')}) is pending for this table; "
            f"submit {wanted} once it has finished, or cancel it"
        )
