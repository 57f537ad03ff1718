"""Claim fairness: an index on `attempt.started_at`.

The claim counts the attempts each capped table started in the last hour
(`max_runs_per_hour`, `TMS_TABLE_RUNS_PER_HOUR`) on every tick of every instance; without
the index that is a scan of the whole attempt history.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_attempt_started_at", "attempt", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_attempt_started_at", table_name="attempt")
