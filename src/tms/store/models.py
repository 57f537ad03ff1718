"""The PostgreSQL data model (docs/architecture.md): tables, commits, operations, attempts.

Constraints live in the database, not only in code: uniqueness makes repeated requests
idempotent (`INSERT … ON CONFLICT`), partial unique indexes enforce "one pending plan-less
operation per table and action" and "one running operation per table", and foreign keys
never cascade, so deleting anything large is always an explicit, batched statement.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Enum,
    ForeignKey,
    Identity,
    Index,
    MetaData,
    Sequence,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from tms.executor_choice import AUTO, EXECUTORS

__all__ = [
    "COMMIT_ORDER",
    "Alert",
    "AlertStatus",
    "Attempt",
    "AttemptOutcome",
    "Base",
    "Commit",
    "Instance",
    "Operation",
    "OperationEvent",
    "OperationStatus",
    "ServiceAction",
    "TableMeasurement",
    "TableType",
    "Tbl",
    "Worker",
]


class ServiceAction(enum.StrEnum):
    """Table service kinds; values are the RFC-43 action names. Stored as text
    (`ActionText`): a new table service is a new member, not a migration."""

    COMPACTION = "compaction"
    CLUSTERING = "clustering"
    CLEAN = "clean"
    METADATA_COMPACTION = "metadata-compaction"
    INDEXING = "indexing"
    LOG_COMPACTION = "logcompaction"
    ARCHIVAL = "archival"
    PARTITION_TTL = "partition_ttl"


class OperationStatus(enum.StrEnum):
    """Lifecycle of an operation; the transitions are drawn in docs/architecture.md
    ("An operation, from claim to result")."""

    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    INVALID = "INVALID"

    @property
    def terminal(self) -> bool:
        return self not in {OperationStatus.SCHEDULED, OperationStatus.RUNNING}


class AttemptOutcome(enum.StrEnum):
    """How one launch ended; RUNNING until the job reports or its lease expires (LOST)."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    LOST = "LOST"
    CANCELLED = "CANCELLED"


class TableType(enum.StrEnum):
    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


class AlertStatus(enum.StrEnum):
    """Delivery state of an alert: PENDING until delivered or out of tries (FAILED)."""

    PENDING = "PENDING"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"


def _pg_enum(cls: type[enum.StrEnum], name: str) -> Enum:
    """Store enum *values* (not member names) in a named PostgreSQL enum type."""
    return Enum(cls, name=name, values_callable=lambda members: [m.value for m in members])


class ActionText(TypeDecorator[ServiceAction]):
    """A `ServiceAction` stored as its text value: the database keeps no list of the table
    services (a PostgreSQL enum would need a migration for each new one), so the values
    are checked here, on the way in and out."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else ServiceAction(value).value

    def process_result_value(self, value: Any, dialect: Dialect) -> ServiceAction | None:
        return None if value is None else ServiceAction(value)


ACTION = ActionText()
OPERATION_STATUS = _pg_enum(OperationStatus, "operation_status")
ATTEMPT_OUTCOME = _pg_enum(AttemptOutcome, "attempt_outcome")
TABLE_TYPE = _pg_enum(TableType, "table_type")
ALERT_STATUS = _pg_enum(AlertStatus, "alert_status")

# Explicit, stable names: the migration creates exactly these, and the schema test compares.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Partial index predicates and server defaults are SQL text (`text()`): DDL, which the
# migrations write as SQL and `tests/store/test_schema.py` compares with the database's.
EXECUTOR_CHECK = "executor IN ({})".format(", ".join(f"'{name}'" for name in EXECUTORS))
"""An operation's executor is one of `tms.executor_choice`' choices: `ck_operation_executor`."""
UNPLANNED = "instant IS NULL AND status IN ('SCHEDULED', 'RUNNING') AND NOT is_deleted"
"""Operations without a plan yet that wait or run: `ux_operation_unplanned`'s predicate."""


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {
        datetime: DateTime(timezone=True),
        dict[str, Any]: JSONB,
        str: Text,
    }


def _now() -> Any:
    return mapped_column(server_default=func.now())


COMMIT_ORDER = Sequence("commit_order", metadata=Base.metadata)
"""The order in which commits were stored and operations created, one sequence for both.

Drawn at insert, after the table's row is locked (`lock_tables_by_base_path`), so for one
table it is the order of the transactions that stored its commits: a commit with a greater
`seq` than an operation's `commit_seq` was stored after that operation was created. The
transaction clock (`now()`, its start) cannot tell: a batch that started earlier may wait
for the table's lock and commit later."""


def _commit_order() -> Any:
    return mapped_column(BigInteger, server_default=COMMIT_ORDER.next_value())


class Tbl(Base):
    """A registered Hudi table: identity, scheduling defaults, and commit counters that the
    policies compare with their thresholds."""

    __tablename__ = "tbl"
    __table_args__ = (
        UniqueConstraint("db_name", "table_name"),
        UniqueConstraint("base_path"),
        CheckConstraint(
            "delta_commits_since_compaction >= 0 AND commits_since_clean >= 0 "
            "AND commits_since_clustering >= 0 AND commits_since_metadata_compaction >= 0 "
            "AND delta_commits_since_log_compaction >= 0 AND commits_since_archival >= 0",
            name="counters",
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    db_name: Mapped[str]
    table_name: Mapped[str]
    base_path: Mapped[str]
    owner: Mapped[str | None]
    queue: Mapped[str] = mapped_column(server_default="default")
    priority: Mapped[int] = mapped_column(server_default="0")
    enabled_actions: Mapped[list[ServiceAction]] = mapped_column(
        ARRAY(ACTION), server_default=text("'{compaction,clean}'::text[]")
    )
    policy: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    table_type: Mapped[TableType | None] = mapped_column(TABLE_TYPE)
    table_version: Mapped[int | None]
    last_commit_instant: Mapped[str | None]
    delta_commits_since_compaction: Mapped[int] = mapped_column(server_default="0")
    commits_since_clean: Mapped[int] = mapped_column(server_default="0")
    commits_since_clustering: Mapped[int] = mapped_column(server_default="0")
    commits_since_metadata_compaction: Mapped[int] = mapped_column(server_default="0")
    delta_commits_since_log_compaction: Mapped[int] = mapped_column(server_default="0")
    """Delta commits since the last log compaction or compaction (either leaves the slices'
    log blocks merged)."""
    commits_since_archival: Mapped[int] = mapped_column(server_default="0")
    """Writes since the policy last created an archival (archival leaves no instant on the
    timeline to recount from)."""
    last_notification_at: Mapped[datetime | None]
    last_commit_seen_at: Mapped[datetime | None]
    """When a commit new to the store (notified or pulled) was last recorded."""
    last_pulled_at: Mapped[datetime | None]
    """When the service last read the table's timeline itself (the pull fallback)."""
    pull_lease_owner: Mapped[str | None]
    pull_lease_expires_at: Mapped[datetime | None]
    """The instance pulling the table now, and until when: one pull per table at a time."""
    log_bytes_since_compaction: Mapped[int] = mapped_column(BigInteger, server_default="0")
    log_files_since_compaction: Mapped[int] = mapped_column(BigInteger, server_default="0")
    small_files_since_clustering: Mapped[dict[str, Any]] = mapped_column(
        server_default=text("'{}'::jsonb")
    )
    """Small base files written since the last clustering, per partition path."""
    last_compaction_at: Mapped[datetime | None]
    last_clustering_at: Mapped[datetime | None]
    last_clean_at: Mapped[datetime | None]
    """When each action last ran (its counter restarted): the time-based triggers' clock."""
    last_partition_ttl_at: Mapped[datetime | None]
    """When the policy last created a partition TTL: its interval's clock."""
    paused: Mapped[bool] = mapped_column(server_default="false")
    last_measured_at: Mapped[datetime | None]
    """When the measurement sweep last took its turn on the table (measured, skipped or
    failed): its interval's clock."""
    measure_lease_owner: Mapped[str | None]
    measure_lease_expires_at: Mapped[datetime | None]
    """The instance measuring the table now, and until when: one measurement at a time."""
    storage_options: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    """Options of the table's filesystem (credentials, endpoint), set by an admin. Secrets:
    read by the jobs' spec and the service's own storage reads, never returned or logged."""
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()

    @property
    def qualified_name(self) -> str:
        return f"{self.db_name}.{self.table_name}"


class Commit(Base):
    """One commit notification; `(tbl_id, instant)` is unique so a repeated callback is a no-op."""

    __tablename__ = "commit"
    __table_args__ = (UniqueConstraint("tbl_id", "instant"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tbl_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tbl.id"))
    instant: Mapped[str]
    action: Mapped[str]
    records: Mapped[int] = mapped_column(BigInteger, server_default="0")
    bytes: Mapped[int] = mapped_column(BigInteger, server_default="0")
    files: Mapped[int] = mapped_column(server_default="0")
    log_files: Mapped[int] = mapped_column(server_default="0")
    log_bytes: Mapped[int] = mapped_column(BigInteger, server_default="0")
    pulled: Mapped[bool] = mapped_column(server_default="false")
    """Recorded by the pull fallback from the timeline, not by a writer's notification."""
    received_at: Mapped[datetime] = _now()
    seq: Mapped[int] = _commit_order()
    """Place in the store's commit order (`COMMIT_ORDER`)."""


class Operation(Base):
    """One table service instant to run (RFC-43's operation row).

    `instant` is NULL while the job still has to schedule the plan itself; a partial unique
    index allows one such pending operation per (table, action), and the job fills the instant
    in once it has written the plan, after which the plain unique key applies.
    """

    __tablename__ = "operation"
    __table_args__ = (
        UniqueConstraint("tbl_id", "action", "instant"),
        Index(
            "ux_operation_unplanned",
            "tbl_id",
            "action",
            unique=True,
            postgresql_where=text(UNPLANNED),
        ),
        Index(
            "ux_operation_running_tbl",
            "tbl_id",
            unique=True,
            postgresql_where=text("status = 'RUNNING'"),
        ),
        Index(
            "ix_operation_claim",
            text("priority DESC"),
            "next_run_at",
            "id",
            postgresql_where=text("status = 'SCHEDULED' AND NOT is_deleted"),
        ),
        Index(
            "ix_operation_lease",
            "lease_expires_at",
            postgresql_where=text("status = 'RUNNING'"),
        ),
        Index("ix_operation_tbl_id", "tbl_id", "id"),
        Index("ix_operation_status", "status", "id"),
        Index(
            "ix_operation_plan_abort_due",
            "tbl_id",
            "action",
            postgresql_where=text("plan_abort_due"),
        ),
        CheckConstraint("max_retries >= 0 AND run_times >= 0", name="retries"),
        CheckConstraint("parallelism IS NULL OR parallelism > 0", name="parallelism"),
        CheckConstraint(
            "status <> 'RUNNING' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL "
            "AND current_attempt_id IS NOT NULL)",
            name="running_has_lease",
        ),
        CheckConstraint(EXECUTOR_CHECK, name="executor"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tbl_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tbl.id"))
    action: Mapped[ServiceAction] = mapped_column(ACTION)
    instant: Mapped[str | None]
    status: Mapped[OperationStatus] = mapped_column(
        OPERATION_STATUS, server_default=OperationStatus.SCHEDULED.value
    )
    engine: Mapped[str] = mapped_column(server_default="spark")
    owner: Mapped[str | None]
    queue: Mapped[str] = mapped_column(server_default="default")
    priority: Mapped[int] = mapped_column(server_default="0")
    resource: Mapped[str | None]
    parallelism: Mapped[int | None]
    extra_params: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    retry_on_error: Mapped[bool] = mapped_column(server_default="true")
    max_retries: Mapped[int] = mapped_column(server_default="3")
    # Launches in the current retry cycle (an operator retry starts a new cycle at 0).
    run_times: Mapped[int] = mapped_column(server_default="0")
    next_run_at: Mapped[datetime] = _now()
    cancellable: Mapped[bool] = mapped_column(server_default="true")
    cancel_requested: Mapped[bool] = mapped_column(server_default="false")
    lease_owner: Mapped[str | None]
    lease_expires_at: Mapped[datetime | None]
    last_heartbeat_at: Mapped[datetime | None]
    # The attempt holding the lease; guards every RUNNING → * transition against stale jobs.
    current_attempt_id: Mapped[int | None] = mapped_column(BigInteger)
    is_deleted: Mapped[bool] = mapped_column(server_default="false")
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = _now()
    # When the operation last entered SCHEDULED (submit, retry, lost lease).
    scheduled_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None]
    last_error: Mapped[str | None]
    result: Mapped[dict[str, Any] | None]
    commit_seq: Mapped[int] = _commit_order()
    """Place in the store's commit order when created: its table's commits with a greater
    `seq` were stored after it (those are what the counters count after a trigger)."""
    executor: Mapped[str] = mapped_column(server_default=AUTO)
    """Who was asked to run its plans (`tms.executor_choice`): the submit's choice, else its
    table policy's, else the installation's."""
    executed_by: Mapped[str | None]
    """The executor its latest job reported having run (`native` or `hudi`)."""
    native_declined: Mapped[str | None]
    """Why the native executor declined the table, when `auto` handed it to Hudi's code."""
    plan_abort_due: Mapped[bool] = mapped_column(server_default="false")
    """Cancelled with a plan on the table that the scheduler has yet to see aborted (or
    settled otherwise): whatever stopped its job, the plan must not stay pending and hold
    its file groups (`tms.scheduler.cancelled_plans`)."""

    table: Mapped[Tbl] = relationship(lazy="select")

    @property
    def cancel_settled(self) -> bool:
        """Cancelled, or its running job already asked to stop: cancelling again changes
        nothing (and is answered as a success, not refused)."""
        return self.status is OperationStatus.CANCELLED or (
            self.status is OperationStatus.RUNNING and self.cancel_requested
        )


class Attempt(Base):
    """One launch of an operation; its outcome and error are kept for good."""

    __tablename__ = "attempt"
    __table_args__ = (
        UniqueConstraint("operation_id", "number"),
        UniqueConstraint("token_hash"),
        # The claim counts the attempts each table started in the last hour (its cap).
        Index("ix_attempt_started_at", "started_at"),
        # The console's overview counts the attempts finished in the last hour and day.
        Index("ix_attempt_finished_at", "finished_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    operation_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("operation.id"))
    number: Mapped[int]
    instance_id: Mapped[str]
    started_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None]
    outcome: Mapped[AttemptOutcome] = mapped_column(
        ATTEMPT_OUTCOME, server_default=AttemptOutcome.RUNNING.value
    )
    exit_code: Mapped[int | None]
    spark_app_id: Mapped[str | None]
    log_path: Mapped[str | None]
    error: Mapped[str | None]
    # sha256 of the bearer token the job uses for its spec, heartbeats and result.
    token_hash: Mapped[str | None]
    figures: Mapped[dict[str, Any] | None]
    engine: Mapped[str | None]
    """`spark-submit` or `spark-worker`: what ran the attempt."""
    worker_id: Mapped[str | None]
    """The worker that claimed the attempt (`spark-worker`)."""
    engine_note: Mapped[str | None]
    """Why the attempt did not go to a worker when one was connected for its queue."""
    first_heartbeat_at: Mapped[datetime | None]
    """When its job first beat: the claim to it is the launch overhead."""
    progress: Mapped[dict[str, Any] | None]
    """What its job last said it was doing (stage, file groups done and planned), from
    its heartbeats while it ran."""
    progress_at: Mapped[datetime | None]
    """When that progress came."""


class Worker(Base):
    """A resident Spark worker (`tms worker`): what it offers and when it last called in."""

    __tablename__ = "worker"
    __table_args__ = (CheckConstraint("slots >= 1 AND busy >= 0", name="slots"),)

    id: Mapped[str] = mapped_column(primary_key=True)
    host: Mapped[str]
    pid: Mapped[int]
    spark_master: Mapped[str]
    queues: Mapped[list[str]] = mapped_column(ARRAY(Text))
    slots: Mapped[int]
    busy: Mapped[int] = mapped_column(server_default="0")
    attempts_run: Mapped[int] = mapped_column(server_default="0")
    started_at: Mapped[datetime] = _now()
    last_seen_at: Mapped[datetime] = _now()


class Alert(Base):
    """One alert to deliver to the webhook: an operation that ended FAILED, or a table
    silent for too long. `dedupe_key` makes raising it again a no-op."""

    __tablename__ = "alert"
    __table_args__ = (
        UniqueConstraint("dedupe_key"),
        Index("ix_alert_operation_id", "operation_id"),
        Index("ix_alert_tbl_id", "tbl_id"),
        Index(
            "ix_alert_due",
            "next_attempt_at",
            postgresql_where=text("status = 'PENDING'"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    kind: Mapped[str]
    dedupe_key: Mapped[str]
    tbl_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tbl.id"))
    operation_id: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("operation.id"))
    payload: Mapped[dict[str, Any]]
    status: Mapped[AlertStatus] = mapped_column(
        ALERT_STATUS, server_default=AlertStatus.PENDING.value
    )
    deliveries: Mapped[int] = mapped_column(server_default="0")
    """Tries so far (each one POST to the webhook)."""
    next_attempt_at: Mapped[datetime] = _now()
    last_error: Mapped[str | None]
    created_at: Mapped[datetime] = _now()
    delivered_at: Mapped[datetime | None]


MEASUREMENT_STATUSES = ("measured", "skipped", "failed")
"""A measurement row's status: figures taken, the table skipped (paused), or its storage
failed (`reason` says why)."""


class TableMeasurement(Base):
    """One measurement of a table (`tms.measure` on its storage, its commits and its
    attempts), kept for a while as its time series (`tms.store.measurements`)."""

    __tablename__ = "table_measurement"
    __table_args__ = (
        Index("ix_table_measurement_tbl_id_measured_at", "tbl_id", "measured_at"),
        CheckConstraint(
            "status IN ({})".format(", ".join(f"'{s}'" for s in MEASUREMENT_STATUSES)),
            name="status",
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tbl_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tbl.id"))
    measured_at: Mapped[datetime] = _now()
    status: Mapped[str]
    reason: Mapped[str | None]
    layout: Mapped[dict[str, Any] | None]
    """The latest file slices' figures (`tms.measure.LayoutMeasurement.to_dict`)."""
    writes: Mapped[dict[str, Any] | None]
    """The write rate over the window, from the stored commits."""
    services: Mapped[dict[str, Any] | None]
    """Each table service's cost over the window, from its attempts."""


class Instance(Base):
    """A service process, for observability (leases name it; nothing references it by key)."""

    __tablename__ = "instance"

    id: Mapped[str] = mapped_column(primary_key=True)
    host: Mapped[str]
    pid: Mapped[int]
    started_at: Mapped[datetime] = _now()
    heartbeat_at: Mapped[datetime] = _now()


class OperationEvent(Base):
    """Every status transition of an operation, written by the transition itself."""

    __tablename__ = "operation_event"
    __table_args__ = (Index("ix_operation_event_operation_id", "operation_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    operation_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("operation.id"))
    attempt_id: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("attempt.id"))
    from_status: Mapped[OperationStatus | None] = mapped_column(OPERATION_STATUS)
    to_status: Mapped[OperationStatus] = mapped_column(OPERATION_STATUS)
    at: Mapped[datetime] = _now()
    reason: Mapped[str | None]
