"""The job side: what a launched job fetches and reports, scoped by its attempt token."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from tms.api.schemas.common import Instant, Text, check_json_text, check_text
from tms.executor_choice import ExecutorChoice
from tms.http.fields import strip_text
from tms.store import AttemptOutcome, OperationStatus, ServiceAction

__all__ = [
    "HeartbeatIn",
    "HeartbeatOut",
    "InstantIn",
    "InstantOut",
    "JobOutcome",
    "ProgressIn",
    "ResultIn",
    "ResultOut",
    "SpecOut",
]

MAX_ERROR_CHARS = 64 * 1024
MAX_STAGE_CHARS = 64
MAX_FILE_GROUPS = 10_000_000


class SpecOut(BaseModel):
    attempt_id: int
    operation_id: int
    action: ServiceAction
    instant: str | None = Field(description="null: the job schedules the plan itself")
    base_path: str
    db_name: str
    table_name: str
    parallelism: int | None
    resource: str | None
    extra_params: dict[str, Any]
    heartbeat_interval_seconds: float
    lease_seconds: float = Field(
        description="a job none of whose heartbeats were answered for this long stops: its "
        "lease may have run out, and another attempt may run the operation"
    )
    cancel_requested: bool
    storage_options: dict[str, Any] = Field(
        description="the table's storage options, secrets included: only its job sees them"
    )
    executor: ExecutorChoice = Field(
        description="who runs the plans, as the operation asks (auto: the job decides once it "
        "has read the table)"
    )


Stage = Annotated[
    Text,
    BeforeValidator(strip_text),
    Field(min_length=1, max_length=MAX_STAGE_CHARS),
    AfterValidator(check_text),
]
FileGroups = Annotated[int, Field(strict=True, ge=0, le=MAX_FILE_GROUPS)]


class ProgressIn(BaseModel):
    """What the job is doing now. Fields a later job adds are ignored."""

    model_config = ConfigDict(extra="ignore")

    stage: Stage = Field(description="a short name: planning, compacting, committing, …")
    file_groups_done: FileGroups | None = Field(
        None, description="file groups the stage has finished (its Spark tasks)"
    )
    file_groups_planned: FileGroups | None = Field(
        None, description="file groups the stage works on"
    )

    @model_validator(mode="after")
    def _done_within_planned(self) -> ProgressIn:
        done, planned = self.file_groups_done, self.file_groups_planned
        if done is not None and planned is not None and done > planned:
            raise ValueError(
                f"file_groups_done ({done}) must not exceed file_groups_planned ({planned})"
            )
        return self


class HeartbeatIn(BaseModel):
    """The job's progress, optionally; other fields are accepted for forward compatibility."""

    model_config = ConfigDict(extra="allow")

    progress: ProgressIn | None = Field(
        None, description="kept on the attempt while it runs (`progress` of its JSON)"
    )


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
