"""RFC-43's JSON endpoints and the GET calls of Hudi's table-service-manager client.

Both are idempotent: the same submit returns the same operation (201 the first time, 200
after, with `created`), and the client, which retries on I/O errors, gets the same
operations back for the same instants.

`index` (action `indexing`) builds or drops metadata partitions, only on request and only
from a plan tms schedules itself: its submit names the `partitions` and takes no instant,
and the client's `REQUEST`, which names plan instants a writer scheduled, is refused (a plan
Hudi writes may name partitions tms does not build, and Hudi's own indexer may be running
it). `CANCEL`, `REGISTER` and remove by the instant the job planned work as for the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from tms.api.deps import ManagerDep, SessionDep, StorageCallsDep, TableAccessDep, require
from tms.api.errors import ApiError, error_responses
from tms.api.extra_params import unusable_params
from tms.api.routes.tables import PendingQuery, register_body
from tms.api.schemas import (
    ClientOut,
    ClientQuery,
    OperationOut,
    RegisterIn,
    RemoveIn,
    SubmitIn,
    SubmitOut,
    TableOut,
)
from tms.application import (
    AutoRegistrationOff,
    CheckedRequest,
    NothingToCompact,
    OperationManager,
    OwnPlanOnly,
    Refused,
    SubmitRequest,
    TableAccess,
    UnusableParams,
)
from tms.blocking_calls import BlockingCalls
from tms.config import Role
from tms.http.storage_calls import call_storage
from tms.hudi.actions import ACTION_ALIASES, TABLE_SERVICE_ACTIONS
from tms.ingest.probe import TableProbe
from tms.ingest.registration import located_base_path
from tms.store import (
    Operation,
    ServiceAction,
    Tbl,
    find_operation,
    find_table,
    find_table_by_base_path,
)

router = APIRouter(
    prefix="/v1/hoodie/service",
    tags=["hudi writers"],
    responses=error_responses(401, 403, 422, 503),
)

_PATH_WORDS = {action: word for word, action in ACTION_ALIASES.items()}
SERVICES = {
    _PATH_WORDS.get(action, action): ServiceAction(action) for action in TABLE_SERVICE_ACTIONS
}
"""Every table service's path word: RFC-43's (`compact`, `cluster`, `clean`, `index`), else
the action's own name (`metadata-compaction`: not in RFC-43, since Hudi's writers compact
their metadata table themselves, for operators who hand that to tms)."""
_WRITER = [require(Role.WRITER)]
_CONFLICTS = error_responses(409, _409="clashes with a registered table or operation")
_BODY = error_responses(400, 413)
_STORAGE = error_responses(502, 504)
_NO_TABLE = error_responses(404, _404="the table is not registered (or no such operation)")


@router.post(
    "/register",
    response_model=TableOut,
    status_code=201,
    dependencies=_WRITER,
    summary="RFC-43 register a table",
    responses={
        200: {"description": "already registered (unchanged)"},
        **_CONFLICTS,
        **_BODY,
        **_STORAGE,
    },
)
def register_table_route(
    body: RegisterIn,
    response: Response,
    session: SessionDep,
    manager: ManagerDep,
    calls: StorageCallsDep,
    pending: PendingQuery = False,
) -> TableOut:
    """201 when created, 200 when this name and base path were registered already."""
    return register_body(session, body, response, manager, calls, pending=pending)


def _table(session: Session, db_name: str, table_name: str) -> Tbl:
    table = find_table(session, db_name=db_name, table_name=table_name)
    if table is None:
        raise ApiError.not_found(f"table {db_name}.{table_name} is not registered")
    return table


def _submit(
    action: ServiceAction,
    body: SubmitIn,
    response: Response,
    session: Session,
    manager: OperationManager,
) -> SubmitOut:
    request = SubmitRequest(
        action=action,
        instants=(body.instant,),
        engine=body.execution_engine,
        executor=body.executor,
        owner=body.owner,
        queue=body.queue,
        priority=body.priority,
        resource=body.resource,
        parallelism=body.parallelism,
        extra_params=body.extra_params,
        retry_on_error=body.retry_on_error,
        max_retries=body.max_retries,
        origin="submit",
    )
    try:
        checked = manager.check_request(request)
        table = _table(session, body.db_name, body.table_name)
        (submitted,) = manager.submit(session, table, checked)
    except Refused as exc:
        raise _refusal(exc, "body.instant", ("body", "extra_params")) from None
    response.status_code = 201 if submitted.created else 200
    out: SubmitOut = SubmitOut.build(submitted.operation, table, created=submitted.created)
    return out


def _refusal(exc: Refused, instant_field: str, params: tuple[str, ...]) -> Exception:
    """A use case's refusal as the answer to a request: `instant_field` is where the instant
    came from, `params` where the `extra_params` did."""
    if isinstance(exc, UnusableParams):
        return unusable_params(exc, params)
    if isinstance(exc, OwnPlanOnly):
        return ApiError.invalid(instant_field, str(exc))
    if isinstance(exc, NothingToCompact):
        return ApiError.conflict("unsupported_action", str(exc))
    return ApiError.conflict("conflict", str(exc))


def _remove(
    action: ServiceAction,
    body: RemoveIn,
    session: Session,
    manager: OperationManager,
    table: TableAccess,
) -> OperationOut:
    tbl = _table(session, body.db_name, body.table_name)
    operation = find_operation(session, tbl_id=tbl.id, action=action, instant=body.instant)
    if operation is None:
        raise ApiError.not_found(
            f"no {action} operation for {tbl.qualified_name} at instant {body.instant}"
        )
    reason = "removed by RFC-43 remove"
    removed = manager.remove(session, operation.id, reason=reason, table=table)
    out: OperationOut = OperationOut.build(removed, tbl)
    return out


def _client(
    action: ServiceAction,
    query: ClientQuery,
    session: Session,
    manager: OperationManager,
    calls: BlockingCalls,
    access: TableAccess,
) -> ClientOut:
    settings = manager.settings
    request = SubmitRequest(
        action=action,
        instants=tuple(query.instants),
        engine=query.engine,
        owner=query.username,
        queue=query.queue,
        resource=query.resource,
        parallelism=query.parallelism,
        extra_params=query.params,
        reason="requested by the Hudi table-service-manager client",
        origin="client",
    )
    checked: CheckedRequest | None = None
    if query.action == "REQUEST":
        try:
            checked = manager.check_request(request)
        except Refused as exc:
            raise _client_refusal(exc) from None
    base_path = (
        located_base_path(settings, calls, query.basepath, "query.basepath")
        if query.basepath
        else None
    )
    table = _client_table(query, base_path, session, manager)
    created_table = table is None
    if table is None:
        assert base_path is not None
        session.rollback()  # no transaction held open while storage is read
        table = _register_for_client(query, base_path, session, manager, calls)
    operations: list[SubmitOut] = []
    missing: list[str] = []
    if checked is not None:
        try:
            submitted = manager.submit(session, table, checked)
        except Refused as exc:
            raise _client_refusal(exc) from None
        operations = [SubmitOut.build(s.operation, table, created=s.created) for s in submitted]
    elif query.action == "CANCEL":
        found: list[Operation] = []
        for instant in query.instants:
            operation = find_operation(session, tbl_id=table.id, action=action, instant=instant)
            if operation is None:
                missing.append(instant)
            else:
                found.append(operation)
        reason = "cancelled by the Hudi client"
        cancelled = manager.cancel(session, [o.id for o in found], reason=reason, table=access)
        operations = [SubmitOut.build(c.operation, table, created=False) for c in cancelled]
    else:
        session.commit()
    return ClientOut(
        action=query.action,
        table_id=table.id,
        table_created=created_table,
        operations=operations,
        missing_instants=missing,
    )


def _client_refusal(exc: Refused) -> Exception:
    """The client's `REQUEST` names instants in `action` and its parameters in one query
    parameter."""
    if isinstance(exc, OwnPlanOnly):
        return ApiError.invalid("query.action", f"REQUEST is not taken for index: {exc}")
    return _refusal(exc, "query.instant", ("query", "extra_params"))


def _client_table(
    query: ClientQuery, base_path: str | None, session: Session, manager: OperationManager
) -> Tbl | None:
    table = None
    if base_path:
        table = find_table_by_base_path(session, base_path)
    if table is None and query.db_name and query.table_name:
        table = find_table(session, db_name=query.db_name, table_name=query.table_name)
    if table is not None:
        return table
    name = base_path or f"{query.db_name}.{query.table_name}"
    if query.action == "CANCEL":
        raise ApiError.not_found(f"no table is registered at {name}")
    if query.action == "REQUEST":
        try:
            manager.check_auto_register(name)
        except AutoRegistrationOff as exc:
            raise ApiError.not_found(str(exc)) from None
    if not base_path:
        raise ApiError.invalid("query.basepath", "required to register an unknown table")
    return None


def _register_for_client(
    query: ClientQuery,
    base_path: str,
    session: Session,
    manager: OperationManager,
    calls: BlockingCalls,
) -> Tbl:
    """A writer's client names a table it writes: storage that this service cannot read
    does not refuse it (as with the commit callback), a hung one does (504/503)."""
    info = call_storage(calls, TableProbe(base_path).look).info
    return manager.register_for_writer(
        session,
        base_path=base_path,
        info=info,
        db_name=query.db_name,
        table_name=query.table_name,
        owner=query.username,
    ).table


def _routes(segment: str, action: ServiceAction) -> None:
    """Submit, remove and the client GET for one RFC-43 path word (compact, cluster, clean,
    index)."""

    def submit(
        body: SubmitIn, response: Response, session: SessionDep, manager: ManagerDep
    ) -> SubmitOut:
        return _submit(action, body, response, session, manager)

    def remove_route(
        body: RemoveIn, session: SessionDep, manager: ManagerDep, table: TableAccessDep
    ) -> OperationOut:
        return _remove(action, body, session, manager, table)

    def client(
        query: Annotated[ClientQuery, Query()],
        session: SessionDep,
        manager: ManagerDep,
        calls: StorageCallsDep,
        table: TableAccessDep,
    ) -> ClientOut:
        return _client(action, query, session, manager, calls, table)

    index = action is ServiceAction.INDEXING
    add: Callable[..., Any] = router.add_api_route
    add(
        f"/{segment}/submit",
        submit,
        methods=["POST"],
        response_model=SubmitOut,
        status_code=201,
        dependencies=_WRITER,
        summary=f"RFC-43 submit a {action} operation",
        description="201 with `created: true` when new; 200 with `created: false` when this "
        "table, action and instant (or the pending plan-less one) exist already."
        + (
            " `extra_params.partitions` (required): metadata partitions to build, one or more "
            "of files, column_stats, partition_stats, record_index; `extra_params.drop=true` "
            "drops them instead. No `instant`: the job plans it. 409 while another index "
            "operation of other partitions waits to plan."
            if index
            else ""
        ),
        responses={200: {"description": "already submitted"}, **_NO_TABLE, **_CONFLICTS, **_BODY},
        operation_id=f"submit_{action}",
    )
    add(
        f"/{segment}/remove",
        remove_route,
        methods=["POST"],
        response_model=OperationOut,
        dependencies=_WRITER,
        summary=f"RFC-43 remove a {action} operation",
        description="Hides the operation; a scheduled one is cancelled, a running one is "
        "refused (409: cancel it first). Removing twice is a no-op.",
        responses={**_NO_TABLE, **_CONFLICTS, **_BODY},
        operation_id=f"remove_{action}",
    )
    add(
        f"/{segment}",
        client,
        methods=["GET"],
        response_model=ClientOut,
        dependencies=_WRITER,
        summary=f"Hudi table-service-manager client: {action}",
        description="`action=REQUEST` creates one operation per instant in `instant` "
        "(comma-separated; idempotent), `CANCEL` cancels them, `REGISTER` registers the "
        "table by `basepath` (reading hoodie.properties when it can)."
        + (
            " For index, `REQUEST` is refused (422): submit the partitions instead."
            if index
            else ""
        ),
        responses={**_NO_TABLE, **_CONFLICTS, **_STORAGE},
        operation_id=f"client_{action}",
    )


for _segment, _action in SERVICES.items():
    _routes(_segment, _action)
