"""The service at a glance (operations per queue, attempts finished per hour and day,
instances and their heartbeats), tables with their backlog and the table services (the
actions an operation may name), for the operator console."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import StringConstraints

from tms.api.deps import SessionDep, SettingsDep, require
from tms.api.errors import error_responses
from tms.api.schemas.common import Text
from tms.api.schemas.overview import (
    ActionsOut,
    InstanceOut,
    OverviewOut,
    QueueOut,
    TableSummaryOut,
    TableSummaryPage,
    ThroughputOut,
)
from tms.config import Role
from tms.hudi.actions import TABLE_SERVICE_ACTIONS
from tms.store import ServiceAction, list_instances
from tms.store.overview import (
    TableSort,
    ThroughputBucket,
    attempt_throughput,
    queue_counts,
    table_summaries,
)

router = APIRouter(
    prefix="/v1/overview", tags=["overview"], responses=error_responses(401, 403, 422, 503)
)

MIN_ALIVE_SECONDS = 30.0
"""An instance counts as alive while it beat within this long (or three ticks, if longer)."""


def _throughput(buckets: list[ThroughputBucket], bucket: timedelta) -> ThroughputOut:
    succeeded = [b.succeeded for b in buckets]
    failed = [b.failed for b in buckets]
    ended = sum(succeeded) + sum(failed)
    return ThroughputOut(
        bucket_seconds=int(bucket.total_seconds()),
        starts=[b.start for b in buckets],
        succeeded=succeeded,
        failed=failed,
        cancelled=[b.cancelled for b in buckets],
        failure_rate=sum(failed) / ended if ended else None,
    )


@router.get("", response_model=OverviewOut, dependencies=[require(Role.VIEWER)])
def overview_route(session: SessionDep, settings: SettingsDep) -> OverviewOut:
    """Running and queued operations per queue; attempts finished per 5 minutes over the
    last hour and per hour over the last day; every known instance with its heartbeat."""
    now = datetime.now(UTC)
    hour, day = timedelta(minutes=5), timedelta(hours=1)
    alive_within = max(MIN_ALIVE_SECONDS, 3 * settings.scheduler_interval_seconds)
    instances = []
    for instance in list_instances(session):
        age = (now - instance.heartbeat_at).total_seconds()
        instances.append(
            InstanceOut(
                id=instance.id,
                host=instance.host,
                pid=instance.pid,
                started_at=instance.started_at,
                heartbeat_at=instance.heartbeat_at,
                heartbeat_age_seconds=max(0.0, age),
                alive=age <= alive_within,
            )
        )
    result = OverviewOut(
        now=now,
        queues=[
            QueueOut(queue=q.queue, running=q.running, queued=q.queued)
            for q in queue_counts(session)
        ],
        last_hour=_throughput(
            attempt_throughput(session, span=timedelta(hours=1), bucket=hour, now=now), hour
        ),
        last_day=_throughput(
            attempt_throughput(session, span=timedelta(days=1), bucket=day, now=now), day
        ),
        instances=instances,
    )
    session.rollback()
    return result


@router.get("/actions", response_model=ActionsOut, dependencies=[require(Role.VIEWER)])
def actions_route() -> ActionsOut:
    """The table-service actions, from the one list the service registry follows
    (`tms.hudi.actions.TABLE_SERVICE_ACTIONS`): the console's action filter offers these."""
    return ActionsOut(actions=[ServiceAction(action) for action in TABLE_SERVICE_ACTIONS])


Search = Annotated[str, StringConstraints(max_length=200), Text]


@router.get("/tables", response_model=TableSummaryPage, dependencies=[require(Role.VIEWER)])
def table_summaries_route(
    session: SessionDep,
    search: Annotated[
        Search | None, Query(description="part of `db.table` or of the base path")
    ] = None,
    sort: Annotated[TableSort, Query()] = TableSort.NAME,
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "asc",
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> TableSummaryPage:
    """Tables with their backlog (delta commits since compaction, commits since clean),
    last commit, pause and the failed attempts of the last 24 hours; searched and sorted by
    the service, a page at a time."""
    now = datetime.now(UTC)
    rows, total = table_summaries(
        session,
        search=search.strip() if search else None,
        sort=sort,
        descending=order == "desc",
        limit=limit,
        offset=offset,
        now=now,
    )
    items = [
        TableSummaryOut(
            id=r.table.id,
            db_name=r.table.db_name,
            table_name=r.table.table_name,
            base_path=r.table.base_path,
            queue=r.table.queue,
            table_type=r.table.table_type.value if r.table.table_type else None,
            paused=r.table.paused,
            delta_commits_since_compaction=r.table.delta_commits_since_compaction,
            commits_since_clean=r.table.commits_since_clean,
            last_commit_instant=r.table.last_commit_instant,
            last_commit_seen_at=r.table.last_commit_seen_at,
            last_commit_age_seconds=(
                max(0.0, (now - r.table.last_commit_seen_at).total_seconds())
                if r.table.last_commit_seen_at is not None
                else None
            ),
            failures_24h=r.failures_24h,
            running=r.running,
            scheduled=r.scheduled,
        )
        for r in rows
    ]
    session.rollback()
    return TableSummaryPage(items=items, total=total, offset=offset)
