"""Operations, their attempts and history, and the RFC-43 submit and remove bodies."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from tms.api.schemas.alerts import AlertBrief
from tms.api.schemas.common import (
    Engine,
    Executor,
    ExtraParams,
    Identifier,
    Instant,
    Label,
    Lenient,
    Parallelism,
    Priority,
    Resource,
)
from tms.executor_choice import ExecutorChoice
from tms.store import (
    Attempt,
    AttemptOutcome,
    Operation,
    OperationEvent,
    OperationStatus,
    ServiceAction,
    Tbl,
)

__all__ = [
    "AttemptOut",
    "ClientOut",
    "EventOut",
    "OperationDetail",
    "OperationOut",
    "OperationPage",
    "RemoveIn",
    "SubmitIn",
    "SubmitOut",
]


_DETAIL = re.compile(
    r"^\s*(Traceback \(most recent call last\)|File \"|at [\w$.<>]+\(|--- last lines of )"
)
"""Where a stored error text turns into detail for the log: a Python traceback, a JVM's
stack frames, the tail of the job's log that the scheduler keeps with an exit."""
MAX_SHOWN_ERROR = 1000


def shown_error(text: str | None) -> str | None:
    """What viewers see of an attempt's error: its class and message, on one line, without
    the traceback or log lines an older job or a crashed one left with it (they hold the
    installation's paths; the attempt's log keeps them)."""
    if text is None:
        return None
    lines: list[str] = []
    for line in text.splitlines():
        if _DETAIL.match(line):
            break
        if line.strip():
            lines.append(line.strip())
    shown = " ".join(lines)
    return shown if len(shown) <= MAX_SHOWN_ERROR else shown[: MAX_SHOWN_ERROR - 1] + "…"


class SubmitIn(Lenient):
    """RFC-43 submit, taking the design's example body as written (`"parallelism": "1000"`,
    `"execution_engine": "Spark"`, `"extra_params": ""`, a 14-digit instant). Without
    `instant` the job schedules the plan itself."""

    db_name: Identifier
    table_name: Identifier
    owner: Label | None = None
    queue: Label | None = None
    instant: Instant | None = None
    resource: Resource | None = Field(None, description="driver:executor memory, e.g. 4g:4g")
    parallelism: Parallelism | None = Field(
        None,
        description="spark.default.parallelism of the job, 1 to 100000: an integer or, as "
        'RFC-43 writes it, a string of digits ("1000")',
    )
    execution_engine: Engine = Field(
        "spark",
        description="spark (a resident worker when one serves the queue, else spark-submit), "
        "spark-submit or spark-worker; case-insensitive (RFC-43 writes Spark)",
    )
    executor: Executor | None = Field(
        None,
        description="who runs the plans: native, hudi or auto; default: the table policy's "
        "`executor`, else the instance's `TMS_EXECUTOR`",
    )
    extra_params: ExtraParams = Field(
        default_factory=dict,
        description='Spark settings: an object, or k1=v1;k2=v2 ("" for none, as RFC-43 '
        "writes it); values are stored as strings",
    )
    priority: Priority | None = None
    max_retries: int | None = Field(None, strict=True, ge=0, le=100)
    retry_on_error: bool = True


class RemoveIn(Lenient):
    """RFC-43 remove: the operation of this table, action and instant (17 or 14 digits)."""

    db_name: Identifier
    table_name: Identifier
    instant: Instant


class OperationOut(BaseModel):
    id: int
    table_id: int
    db_name: str | None
    table_name: str | None
    action: ServiceAction
    instant: str | None
    status: OperationStatus
    engine: str
    owner: str | None
    queue: str
    priority: int
    resource: str | None
    parallelism: int | None
    extra_params: dict[str, Any]
    retry_on_error: bool
    max_retries: int
    run_times: int
    next_run_at: datetime
    cancellable: bool
    cancel_requested: bool
    is_deleted: bool
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_heartbeat_at: datetime | None
    current_attempt_id: int | None
    created_at: datetime
    updated_at: datetime
    scheduled_at: datetime
    finished_at: datetime | None
    last_error: str | None = Field(
        description="why its last attempt failed: the error's class and message (the "
        "traceback is in the attempt's log)"
    )
    result: dict[str, Any] | None
    executor: ExecutorChoice = Field(
        description="who was asked to run its plans: the submit's choice, else the table "
        "policy's, else the instance's (auto, native or hudi)"
    )
    executed_by: Literal["native", "hudi"] | None = Field(
        description="the executor its latest job reported having run; null before one did"
    )
    native_declined: str | None = Field(
        description="why the native executor declined the table, when auto handed it to "
        "Apache Hudi's code"
    )

    @classmethod
    def build(cls, operation: Operation, table: Tbl | None, **extra: Any) -> Any:
        own = {"table_id", "db_name", "table_name", "last_error"}
        values = {
            name: getattr(operation, name)
            for name in cls.model_fields
            if name not in own and name not in extra
        }
        return cls(
            table_id=operation.tbl_id,
            db_name=table.db_name if table is not None else None,
            table_name=table.table_name if table is not None else None,
            last_error=shown_error(operation.last_error),
            **values,
            **extra,
        )


class SubmitOut(OperationOut):
    created: bool = Field(description="true when this call created the operation")


class EventOut(BaseModel):
    id: int
    attempt_id: int | None
    from_status: OperationStatus | None
    to_status: OperationStatus
    at: datetime
    reason: str | None

    @classmethod
    def of(cls, event: OperationEvent) -> EventOut:
        return cls.model_validate(event, from_attributes=True)


class OperationDetail(OperationOut):
    events: list[EventOut]
    alerts: list[AlertBrief] = Field(
        description="alerts raised about it (each time it ended FAILED), oldest first"
    )


class OperationPage(BaseModel):
    items: list[OperationOut]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next page")


class AttemptOut(BaseModel):
    id: int
    operation_id: int
    number: int
    instance_id: str
    started_at: datetime
    finished_at: datetime | None
    duration_seconds: float | None
    outcome: AttemptOutcome
    exit_code: int | None
    spark_app_id: str | None
    log_path: str | None
    error: str | None = Field(
        description="why it failed: the error's class and message (the traceback is in its log)"
    )
    figures: dict[str, Any] | None
    engine: str | None = Field(None, description="spark-submit or spark-worker")
    worker_id: str | None = Field(None, description="the resident worker that ran it")
    engine_note: str | None = Field(
        None, description="why it did not run in a worker that served its queue"
    )
    launch_seconds: float | None = Field(
        None, description="from the claim to the job's first heartbeat (launch overhead)"
    )
    progress: dict[str, Any] | None = Field(
        None,
        description="what its job last said it was doing, from its heartbeats: `stage` (a "
        "short name: planning, compacting, committing, syncing metadata, …), "
        "`file_groups_done` and `file_groups_planned` (null when the stage has none); "
        "kept after the attempt ends",
    )
    progress_at: datetime | None = Field(None, description="when that progress came")

    @classmethod
    def of(cls, attempt: Attempt) -> AttemptOut:
        duration = (
            (attempt.finished_at - attempt.started_at).total_seconds()
            if attempt.finished_at is not None
            else None
        )
        return cls(
            id=attempt.id,
            operation_id=attempt.operation_id,
            number=attempt.number,
            instance_id=attempt.instance_id,
            started_at=attempt.started_at,
            finished_at=attempt.finished_at,
            duration_seconds=duration,
            outcome=attempt.outcome,
            exit_code=attempt.exit_code,
            spark_app_id=attempt.spark_app_id,
            log_path=attempt.log_path,
            error=shown_error(attempt.error),
            figures=attempt.figures,
            engine=attempt.engine,
            worker_id=attempt.worker_id,
            engine_note=attempt.engine_note,
            launch_seconds=(
                (attempt.first_heartbeat_at - attempt.started_at).total_seconds()
                if attempt.first_heartbeat_at is not None
                else None
            ),
            progress=attempt.progress,
            progress_at=attempt.progress_at,
        )


class ClientOut(BaseModel):
    """What a Hudi table-service-manager client call did (Hudi itself ignores the body)."""

    action: Literal["REQUEST", "CANCEL", "REGISTER"]
    table_id: int
    table_created: bool
    operations: list[SubmitOut]
    missing_instants: list[str] = Field(
        default_factory=list, description="CANCEL: listed instants with no operation"
    )
