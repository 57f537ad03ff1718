"""The job side: what a launched job fetches and reports, scoped by its attempt token."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tms.api.schemas.common import Instant

__all__ = [
    "HeartbeatIn",
    "HeartbeatOut",
    "InstantIn",
    "InstantOut",
    "JobOutcome",
    "ResultIn",
    "ResultOut",
    "SpecOut",
]

MAX_ERROR_CHARS = 64 * 1024


class SpecOut(BaseModel):
    attempt_id: int
    operation_id: int
    action: str = Field(description="compaction | clustering | clean")
    instant: str | None = Field(description="null: the job schedules the plan itself")
    base_path: str
    db_name: str
    table_name: str
    parallelism: int | None
    resource: str | None
    extra_params: dict[str, Any]
    heartbeat_interval_seconds: float
    cancel_requested: bool


class HeartbeatIn(BaseModel):
    """Empty today; extra fields (progress) are accepted for forward compatibility."""

    model_config = ConfigDict(extra="allow")


class HeartbeatOut(BaseModel):
    lease_expires_at: datetime
    cancel_requested: bool


class InstantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instant: Instant


class InstantOut(BaseModel):
    operation_id: int
    instant: str


class JobOutcome(enum.StrEnum):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    INVALID = "INVALID"


class ResultIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    outcome: JobOutcome
    error: str | None = Field(None, description=f"kept up to {MAX_ERROR_CHARS} characters")
    retryable: bool = False
    figures: dict[str, Any] = Field(default_factory=dict)
    spark_app_id: str | None = Field(None, max_length=255)


class ResultOut(BaseModel):
    operation_id: int
    attempt_id: int
    operation_status: str
    attempt_outcome: str
    next_run_at: datetime | None = Field(description="when a retry is due (status SCHEDULED)")
    duplicate: bool = Field(description="true when this result had been recorded before")
