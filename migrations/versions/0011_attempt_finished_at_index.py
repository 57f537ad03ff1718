"""The console's throughput charts: an index on `attempt.finished_at`.

The overview counts the attempts that finished in the last hour and the last day, by
outcome; without the index each load of the page scans the whole attempt history.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_attempt_finished_at", "attempt", ["finished_at"])


def downgrade() -> None:
    op.drop_index("ix_attempt_finished_at", table_name="attempt")
