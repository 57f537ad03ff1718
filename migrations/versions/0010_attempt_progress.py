"""Attempt progress: what a running job last said it was doing.

Each heartbeat of a running attempt may carry its progress (the stage it is in, file groups
done out of planned); the last one is kept on the attempt, with when it came, so an
operator can watch a long Spark job instead of waiting in the dark.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("attempt", sa.Column("progress", pg.JSONB(), nullable=True))
    op.add_column("attempt", sa.Column("progress_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("attempt", "progress_at")
    op.drop_column("attempt", "progress")
