"""Resident Spark workers: the `worker` table, and which engine ran each attempt.

A worker (`tms worker`) is a long-running PySpark application that claims attempts over the
API and runs them on its one SparkSession. Its row says what it offers (queues, slots) and
when it last called in; an attempt records the engine that ran it (`spark-submit` or
`spark-worker`), the worker, why an operation that could have gone to a worker did not,
and its job's first heartbeat (the end of its launch).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "worker",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("spark_master", sa.Text(), nullable=False),
        sa.Column("queues", pg.ARRAY(sa.Text()), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("busy", sa.Integer(), server_default="0", nullable=False),
        sa.Column("attempts_run", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "started_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "last_seen_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.now(),
            nullable=False,
        ),
        sa.CheckConstraint("slots >= 1 AND busy >= 0", name=op.f("ck_worker_slots")),
        sa.PrimaryKeyConstraint("id", name="pk_worker"),
    )
    op.add_column("attempt", sa.Column("engine", sa.Text(), nullable=True))
    op.add_column("attempt", sa.Column("worker_id", sa.Text(), nullable=True))
    op.add_column("attempt", sa.Column("engine_note", sa.Text(), nullable=True))
    op.add_column(
        "attempt", sa.Column("first_heartbeat_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("attempt", "first_heartbeat_at")
    op.drop_column("attempt", "engine_note")
    op.drop_column("attempt", "worker_id")
    op.drop_column("attempt", "engine")
    op.drop_table("worker")
