"""Pull fallback, trigger counters and alerts.

- `tbl`: when a new commit was last recorded (`last_commit_seen_at`), when the service last
  read the table's timeline itself and which instance is pulling it now (a lease), the log
  bytes and files written since the last compaction, the small base files written since the
  last clustering per partition, and when compaction, clustering and clean last ran.
- `commit`: the log bytes a commit wrote, and whether the pull recorded it.
- `alert`: alerts to deliver to the webhook, with their delivery state.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIMESTAMPS = (
    "last_commit_seen_at",
    "last_pulled_at",
    "pull_lease_expires_at",
    "last_compaction_at",
    "last_clustering_at",
    "last_clean_at",
)


def upgrade() -> None:
    for name in _TIMESTAMPS:
        op.add_column("tbl", sa.Column(name, sa.DateTime(timezone=True), nullable=True))
    op.add_column("tbl", sa.Column("pull_lease_owner", sa.Text(), nullable=True))
    op.add_column(
        "tbl",
        sa.Column(
            "log_bytes_since_compaction", sa.BigInteger(), server_default="0", nullable=False
        ),
    )
    op.add_column(
        "tbl",
        sa.Column(
            "log_files_since_compaction", sa.BigInteger(), server_default="0", nullable=False
        ),
    )
    op.add_column(
        "tbl",
        sa.Column(
            "small_files_since_clustering",
            pg.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
    )
    # Tables that were already notified: their silence counts from their last notification.
    op.execute("UPDATE tbl SET last_commit_seen_at = last_notification_at")
    op.add_column(
        "commit", sa.Column("log_bytes", sa.BigInteger(), server_default="0", nullable=False)
    )
    op.add_column(
        "commit", sa.Column("pulled", sa.Boolean(), server_default="false", nullable=False)
    )
    alert_status = pg.ENUM("PENDING", "DELIVERED", "FAILED", name="alert_status", create_type=False)
    alert_status.create(op.get_bind(), checkfirst=False)
    op.create_table(
        "alert",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("dedupe_key", sa.Text(), nullable=False),
        sa.Column("tbl_id", sa.BigInteger(), nullable=False),
        sa.Column("operation_id", sa.BigInteger(), nullable=True),
        sa.Column("payload", pg.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("status", alert_status, server_default="PENDING", nullable=False),
        sa.Column("deliveries", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "next_attempt_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["tbl_id"], ["tbl.id"], name="fk_alert_tbl_id_tbl"),
        sa.ForeignKeyConstraint(
            ["operation_id"], ["operation.id"], name="fk_alert_operation_id_operation"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_alert"),
        sa.UniqueConstraint("dedupe_key", name="uq_alert_dedupe_key"),
    )
    op.create_index("ix_alert_operation_id", "alert", ["operation_id"])
    op.create_index("ix_alert_tbl_id", "alert", ["tbl_id"])
    op.create_index(
        "ix_alert_due",
        "alert",
        ["next_attempt_at"],
        postgresql_where=sa.text("status = 'PENDING'"),
    )


def downgrade() -> None:
    op.drop_table("alert")
    op.execute("DROP TYPE alert_status")
    op.drop_column("commit", "pulled")
    op.drop_column("commit", "log_bytes")
    for name in (
        *_TIMESTAMPS,
        "pull_lease_owner",
        "log_bytes_since_compaction",
        "log_files_since_compaction",
        "small_files_since_clustering",
    ):
        op.drop_column("tbl", name)
