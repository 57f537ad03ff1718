"""Cancelled operations whose plan the scheduler has yet to abort on the table.

A cancel can stop a job before it writes the cancel request itself (it was still starting
Spark, or it was killed): `plan_abort_due` marks the cancelled operations whose plan may
still be pending, so the scheduler aborts it (RFC-79) and no plan is left holding file
groups. Operations cancelled before this revision are not marked: their plans were handled
as before.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "operation",
        sa.Column("plan_abort_due", sa.Boolean(), server_default="false", nullable=False),
    )
    op.create_index(
        "ix_operation_plan_abort_due",
        "operation",
        ["tbl_id", "action"],
        postgresql_where=sa.text("plan_abort_due"),
    )


def downgrade() -> None:
    op.drop_index("ix_operation_plan_abort_due", table_name="operation")
    op.drop_column("operation", "plan_abort_due")
