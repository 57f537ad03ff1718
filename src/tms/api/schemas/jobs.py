"""The job side: what a launched job fetches and reports, scoped by its attempt token."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from tms.api.schemas.common import Instant, Text, check_json_text
from tms.store import Action, AttemptOutcome, OperationStatus

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
    action: Action
    instant: str | None = Field(description="null: the job schedules the plan itself")
    base_path: str
    db_name: str
    table_name: str
    parallelism: int | None
    resource: str | None
    extra_params: dict[str, Any]
    heartbeat_interval_seconds: float
    cancel_requested: bool
    storage_options: dict[str, Any] = Field(
        description="the table's storage options, secrets included: only its job sees them"
    )


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


class TableLockOut(BaseModel):
    held: bool = Field(
        description="true when the attempt holds its table's PostgreSQL advisory lock (now or "
        "before); false while another holder has it: ask again"
    )


class JobOutcome(enum.StrEnum):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    INVALID = "INVALID"


class ResultIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    outcome: JobOutcome
    error: Text | None = Field(None, description=f"kept up to {MAX_ERROR_CHARS} characters")
    retryable: bool = False
    figures: Annotated[dict[str, Any], AfterValidator(check_json_text)] = Field(
        default_factory=dict
    )
    spark_app_id: Text | None = Field(None, max_length=255)


class ResultOut(BaseModel):
    operation_id: int
    attempt_id: int
    operation_status: OperationStatus
    attempt_outcome: AttemptOutcome
    next_run_at: datetime | None = Field(description="when a retry is due (status SCHEDULED)")
    duplicate: bool = Field(description="true when this result had been recorded before")
