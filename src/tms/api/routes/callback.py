"""Hudi's HTTP commit callback: store the commit, count it, run the policies, then ack.

Hudi does not retry a failed callback, so the 200 is sent only after the commit row, the
counters and any operations the policies created are committed together.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header

from tms.api import observe
from tms.api.auth import authorize, callback_key_ok, unauthorized
from tms.api.commit_action import (
    action_from_payload,
    action_from_stats,
    action_from_table_type,
    summarize,
)
from tms.api.deps import BearerDep, SessionDep, SettingsDep
from tms.api.errors import ApiError
from tms.api.probe import TableProbe
from tms.api.registration import DEFAULT_DB_NAME, register
from tms.api.schemas import CallbackIn, CallbackOut
from tms.config import Role
from tms.policies import apply_triggers
from tms.store.commits import record_commit
from tms.store.models import Action
from tms.store.tables import find_table_by_base_path, reset_counter

router = APIRouter(prefix="/v1/hoodie/service", tags=["hudi writers"])

# A commit that is itself a table service run by the writer restarts that service's counter.
_SERVICE_ACTIONS = {"compaction": Action.COMPACTION, "clustering": Action.CLUSTERING}


async def _callback_caller(
    settings: SettingsDep,
    credentials: BearerDep,
    key: Annotated[
        str | None,
        Header(alias="HUDI-CALLBACK-KEY", description="one of TMS_CALLBACK_KEYS"),
    ] = None,
) -> None:
    """The callback key Hudi sends; with auth on, a writer (or admin) bearer token also
    passes, so our own tools can notify without knowing the writers' key."""
    if callback_key_ok(settings, key):
        return
    if settings.auth_enabled and credentials is not None:
        authorize(settings, credentials.credentials, Role.WRITER)
        return
    raise unauthorized("missing or wrong HUDI-CALLBACK-KEY header")


@router.post(
    "/commit",
    response_model=CallbackOut,
    dependencies=[Depends(_callback_caller)],
    summary="Hudi HTTP commit callback",
    responses={401: {"description": "missing or wrong HUDI-CALLBACK-KEY"}},
)
def commit_callback(body: CallbackIn, session: SessionDep, settings: SettingsDep) -> CallbackOut:
    """Idempotent per (table, commitTime): a repeated notification stores nothing new and
    answers `new: false`. An unknown table is registered when auto-registration is on."""
    stats = body.write_stats or []
    probe = TableProbe(body.base_path)
    # Storage first, before the transaction starts: it may be slow.
    action, source = action_from_payload(body.commit_action_type), "payload"
    if action is None:
        action, source = action_from_stats(stats), "write_stats"
    if action is None:
        action, source = probe.action_of(body.commit_time), "timeline"

    table = find_table_by_base_path(session, body.base_path)
    registered = False
    if table is None:
        if not settings.auto_register:
            raise ApiError.not_found(
                f"no table is registered at {body.base_path} and auto-registration is off"
            )
        info = probe.info()
        db_name = info.database_name if info is not None and info.database_name else None
        result = register(
            session,
            db_name=db_name or DEFAULT_DB_NAME,
            table_name=body.table_name,
            base_path=body.base_path,
            probe=probe,
        )
        table, registered = result.table, result.created
    if action is None:
        action, source = action_from_table_type(table.table_type), "table_type"

    summary = summarize(stats)
    recorded = record_commit(
        session,
        table.id,
        instant=body.commit_time,
        action=action,
        records=summary.records,
        bytes_written=summary.bytes_written,
        files=summary.files,
        log_files=summary.log_files,
    )
    created = []
    if recorded.new:
        service = _SERVICE_ACTIONS.get(action)
        if service is not None:
            reset_counter(session, table.id, service)
            session.refresh(recorded.table)
        created = apply_triggers(session, recorded.table, settings)
    session.commit()

    observe.commit_notified("callback", new=recorded.new)
    observe.operations_created(created, "policy")
    return CallbackOut(
        table_id=table.id,
        commit_time=body.commit_time,
        action=action,
        action_source=source,
        new=recorded.new,
        table_registered=registered,
        operations_created=[op.id for op in created],
    )
