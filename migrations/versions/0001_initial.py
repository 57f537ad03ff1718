"""Initial schema: tbl, commit, operation, attempt, instance, operation_event.

Revision ID: 0001
Revises:
Create Date: 2025-11-22

Written out in full (not imported from tms.store.models) so that it stays what it was when
later migrations change the models; tests/store/test_schema.py checks the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTION = pg.ENUM("compaction", "clustering", "clean", "indexing", name="action", create_type=False)
STATUS = pg.ENUM(
    "SCHEDULED",
    "RUNNING",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "INVALID",
    name="operation_status",
    create_type=False,
)
OUTCOME = pg.ENUM(
    "RUNNING", "SUCCEEDED", "FAILED", "LOST", "CANCELLED", name="attempt_outcome", create_type=False
)
TABLE_TYPE = pg.ENUM("COPY_ON_WRITE", "MERGE_ON_READ", name="table_type", create_type=False)
ENUMS = (ACTION, STATUS, OUTCOME, TABLE_TYPE)

NOW = sa.text("now()")
TS = sa.DateTime(timezone=True)


def _id() -> sa.Column[int]:
    return sa.Column("id", sa.BigInteger(), sa.Identity(), nullable=False)


def upgrade() -> None:
    bind = op.get_bind()
    for enum in ENUMS:
        enum.create(bind, checkfirst=False)

    op.create_table(
        "tbl",
        _id(),
        sa.Column("db_name", sa.Text(), nullable=False),
        sa.Column("table_name", sa.Text(), nullable=False),
        sa.Column("base_path", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("queue", sa.Text(), server_default="default", nullable=False),
        sa.Column("priority", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "enabled_actions",
            pg.ARRAY(ACTION),
            server_default=sa.text("'{compaction,clean}'::action[]"),
            nullable=False,
        ),
        sa.Column("policy", pg.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("table_type", TABLE_TYPE, nullable=True),
        sa.Column("table_version", sa.Integer(), nullable=True),
        sa.Column("last_commit_instant", sa.Text(), nullable=True),
        sa.Column(
            "delta_commits_since_compaction", sa.Integer(), server_default="0", nullable=False
        ),
        sa.Column("commits_since_clean", sa.Integer(), server_default="0", nullable=False),
        sa.Column("commits_since_clustering", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_notification_at", TS, nullable=True),
        sa.Column("paused", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("created_at", TS, server_default=NOW, nullable=False),
        sa.Column("updated_at", TS, server_default=NOW, nullable=False),
        sa.CheckConstraint(
            "delta_commits_since_compaction >= 0 AND commits_since_clean >= 0 "
            "AND commits_since_clustering >= 0",
            name=op.f("ck_tbl_counters"),
        ),
        sa.PrimaryKeyConstraint("id", name="pk_tbl"),
        sa.UniqueConstraint("base_path", name="uq_tbl_base_path"),
        sa.UniqueConstraint("db_name", "table_name", name="uq_tbl_db_name_table_name"),
    )

    op.create_table(
        "commit",
        _id(),
        sa.Column("tbl_id", sa.BigInteger(), nullable=False),
        sa.Column("instant", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("records", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("bytes", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("files", sa.Integer(), server_default="0", nullable=False),
        sa.Column("log_files", sa.Integer(), server_default="0", nullable=False),
        sa.Column("received_at", TS, server_default=NOW, nullable=False),
        sa.ForeignKeyConstraint(["tbl_id"], ["tbl.id"], name="fk_commit_tbl_id_tbl"),
        sa.PrimaryKeyConstraint("id", name="pk_commit"),
        sa.UniqueConstraint("tbl_id", "instant", name="uq_commit_tbl_id_instant"),
    )

    op.create_table(
        "operation",
        _id(),
        sa.Column("tbl_id", sa.BigInteger(), nullable=False),
        sa.Column("action", ACTION, nullable=False),
        sa.Column("instant", sa.Text(), nullable=True),
        sa.Column("status", STATUS, server_default="SCHEDULED", nullable=False),
        sa.Column("engine", sa.Text(), server_default="spark", nullable=False),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("queue", sa.Text(), server_default="default", nullable=False),
        sa.Column("priority", sa.Integer(), server_default="0", nullable=False),
        sa.Column("resource", sa.Text(), nullable=True),
        sa.Column("parallelism", sa.Integer(), nullable=True),
        sa.Column(
            "extra_params", pg.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False
        ),
        sa.Column("retry_on_error", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("max_retries", sa.Integer(), server_default="3", nullable=False),
        sa.Column("run_times", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_run_at", TS, server_default=NOW, nullable=False),
        sa.Column("cancellable", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", TS, nullable=True),
        sa.Column("last_heartbeat_at", TS, nullable=True),
        sa.Column("current_attempt_id", sa.BigInteger(), nullable=True),
        sa.Column("is_deleted", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("created_at", TS, server_default=NOW, nullable=False),
        sa.Column("updated_at", TS, server_default=NOW, nullable=False),
        sa.Column("scheduled_at", TS, server_default=NOW, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("result", pg.JSONB(), nullable=True),
        sa.CheckConstraint(
            "max_retries >= 0 AND run_times >= 0", name=op.f("ck_operation_retries")
        ),
        sa.CheckConstraint(
            "parallelism IS NULL OR parallelism > 0", name=op.f("ck_operation_parallelism")
        ),
        sa.CheckConstraint(
            "status <> 'RUNNING' OR (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL "
            "AND current_attempt_id IS NOT NULL)",
            name=op.f("ck_operation_running_has_lease"),
        ),
        sa.ForeignKeyConstraint(["tbl_id"], ["tbl.id"], name="fk_operation_tbl_id_tbl"),
        sa.PrimaryKeyConstraint("id", name="pk_operation"),
        sa.UniqueConstraint(
            "tbl_id", "action", "instant", name="uq_operation_tbl_id_action_instant"
        ),
    )
    op.create_index(
        "ux_operation_unplanned",
        "operation",
        ["tbl_id", "action"],
        unique=True,
        postgresql_where=sa.text(
            "instant IS NULL AND status IN ('SCHEDULED', 'RUNNING') AND NOT is_deleted"
        ),
    )
    op.create_index(
        "ux_operation_running_tbl",
        "operation",
        ["tbl_id"],
        unique=True,
        postgresql_where=sa.text("status = 'RUNNING'"),
    )
    op.create_index(
        "ix_operation_claim",
        "operation",
        [sa.text("priority DESC"), "next_run_at", "id"],
        postgresql_where=sa.text("status = 'SCHEDULED' AND NOT is_deleted"),
    )
    op.create_index(
        "ix_operation_lease",
        "operation",
        ["lease_expires_at"],
        postgresql_where=sa.text("status = 'RUNNING'"),
    )
    op.create_index("ix_operation_tbl_id", "operation", ["tbl_id", "id"])
    op.create_index("ix_operation_status", "operation", ["status", "id"])

    op.create_table(
        "attempt",
        _id(),
        sa.Column("operation_id", sa.BigInteger(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.Text(), nullable=False),
        sa.Column("started_at", TS, server_default=NOW, nullable=False),
        sa.Column("finished_at", TS, nullable=True),
        sa.Column("outcome", OUTCOME, server_default="RUNNING", nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("spark_app_id", sa.Text(), nullable=True),
        sa.Column("log_path", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("token_hash", sa.Text(), nullable=True),
        sa.Column("figures", pg.JSONB(), nullable=True),
        sa.ForeignKeyConstraint(
            ["operation_id"], ["operation.id"], name="fk_attempt_operation_id_operation"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_attempt"),
        sa.UniqueConstraint("operation_id", "number", name="uq_attempt_operation_id_number"),
        sa.UniqueConstraint("token_hash", name="uq_attempt_token_hash"),
    )

    op.create_table(
        "instance",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", TS, server_default=NOW, nullable=False),
        sa.Column("heartbeat_at", TS, server_default=NOW, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_instance"),
    )

    op.create_table(
        "operation_event",
        _id(),
        sa.Column("operation_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt_id", sa.BigInteger(), nullable=True),
        sa.Column("from_status", STATUS, nullable=True),
        sa.Column("to_status", STATUS, nullable=False),
        sa.Column("at", TS, server_default=NOW, nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["attempt.id"], name="fk_operation_event_attempt_id_attempt"
        ),
        sa.ForeignKeyConstraint(
            ["operation_id"], ["operation.id"], name="fk_operation_event_operation_id_operation"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_operation_event"),
    )
    op.create_index("ix_operation_event_operation_id", "operation_event", ["operation_id", "id"])


def downgrade() -> None:
    for table in ("operation_event", "attempt", "instance", "operation", "commit", "tbl"):
        op.drop_table(table)
    bind = op.get_bind()
    for enum in reversed(ENUMS):
        enum.drop(bind, checkfirst=False)
