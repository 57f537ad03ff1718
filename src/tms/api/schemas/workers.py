"""Bodies of the resident workers' endpoints (`/v1/workers`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, StrictFloat, StrictInt

from tms.api.schemas.common import Identifier, Strict, Text

__all__ = ["ClaimIn", "ClaimOut", "ClaimedAttempt", "WorkerIn", "WorkerOut"]

WorkerId = Annotated[Text, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:@-]+$")]


class WorkerIn(Strict):
    """What a worker offers; registering again with the same id refreshes it."""

    id: WorkerId
    host: Annotated[Text, Field(min_length=1, max_length=255)]
    pid: Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
    spark_master: Annotated[Text, Field(min_length=1, max_length=500)]
    queues: Annotated[list[Identifier], Field(min_length=1, max_length=100)]
    slots: Annotated[StrictInt, Field(ge=1, le=256)]


class WorkerOut(BaseModel):
    id: str
    host: str
    pid: int
    spark_master: str
    queues: list[str]
    slots: int
    busy: int
    attempts_run: int
    started_at: datetime
    last_seen_at: datetime
    alive: bool = Field(description="called in within TMS_WORKER_TIMEOUT_SECONDS")


class ClaimIn(Strict):
    free: Annotated[StrictInt, Field(ge=0, le=256)] = Field(
        description="slots free for new attempts"
    )
    busy: Annotated[StrictInt, Field(ge=0, le=256)] = Field(0, description="attempts running now")
    wait_seconds: Annotated[StrictFloat, Field(ge=0, le=60)] = Field(
        20.0, description="wait this long for due work (capped by TMS_WORKER_POLL_SECONDS)"
    )
    log_dir: Annotated[Text, Field(max_length=1000)] | None = Field(
        None, description="where the worker writes its attempts' logs (<dir>/<op>/<attempt>.log)"
    )


class ClaimedAttempt(BaseModel):
    attempt_id: int
    operation_id: int
    action: str
    token: str = Field(description="the attempt's job token (the job API's bearer)")


class ClaimOut(BaseModel):
    attempts: list[ClaimedAttempt]
