"""What the operator console reads beyond the resources: the service at a glance, tables
with their backlog, a table's file groups, the caller's role, the table services."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from tms.config import Role
from tms.store import ServiceAction

__all__ = [
    "ActionsOut",
    "FileGroupOut",
    "FileGroupsOut",
    "InstanceOut",
    "OverviewOut",
    "QueueOut",
    "TableSummaryOut",
    "TableSummaryPage",
    "ThroughputOut",
    "WhoAmIOut",
]


class WhoAmIOut(BaseModel):
    role: Role = Field(description="what the bearer token may do (admin when auth is off)")
    auth_enabled: bool


class ActionsOut(BaseModel):
    """The table services, so a client offers the actions the service runs, not a list of
    its own that falls behind when a service is added."""

    actions: list[ServiceAction] = Field(
        description="every table-service action, in the order the service lists them"
    )


class QueueOut(BaseModel):
    queue: str
    running: int
    queued: int = Field(description="SCHEDULED operations, due or waiting to retry")


class ThroughputOut(BaseModel):
    """Attempts finished per bucket; the failure rate is failed / (succeeded + failed)."""

    bucket_seconds: int
    starts: list[datetime]
    succeeded: list[int]
    failed: list[int] = Field(description="attempts that FAILED or were LOST")
    cancelled: list[int]
    failure_rate: float | None = Field(description="over the whole span; null if none ended")


class InstanceOut(BaseModel):
    id: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    heartbeat_age_seconds: float
    alive: bool = Field(description="beat within three scheduler intervals (at least 30 s)")


class OverviewOut(BaseModel):
    now: datetime
    queues: list[QueueOut]
    last_hour: ThroughputOut
    last_day: ThroughputOut
    instances: list[InstanceOut]


class TableSummaryOut(BaseModel):
    id: int
    db_name: str
    table_name: str
    base_path: str
    queue: str
    table_type: str | None
    paused: bool
    delta_commits_since_compaction: int
    commits_since_clean: int
    last_commit_instant: str | None
    last_commit_seen_at: datetime | None
    last_commit_age_seconds: float | None
    failures_24h: int = Field(description="attempts of its operations that failed in 24 h")
    running: int
    scheduled: int


class TableSummaryPage(BaseModel):
    items: list[TableSummaryOut]
    total: int = Field(description="tables matching the search")
    offset: int


class FileGroupOut(BaseModel):
    partition: str
    file_id: str
    slices: int = Field(description="file slices on storage (older ones go at the next clean)")
    base_instant: str = Field(description="of the latest slice")
    base_file: str | None
    base_file_size: int
    log_files: int = Field(description="log files of the latest slice")
    log_size: int
    total_size: int = Field(description="of every slice")


class FileGroupsOut(BaseModel):
    table_id: int
    partitions: int
    file_groups: int
    slices: int
    log_files: int
    total_size: int
    items: list[FileGroupOut] = Field(description="the first `limit` file groups")
    truncated: bool
