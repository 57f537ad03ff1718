"""The `metadata-compaction` action: compaction of a table's metadata table.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

PostgreSQL adds an enum value in place; it cannot drop one, so the downgrade refuses while
any row still uses it and otherwise rebuilds the type without it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TYPE action ADD VALUE IF NOT EXISTS 'metadata-compaction' AFTER 'clean'")


def downgrade() -> None:
    op.execute("DELETE FROM operation WHERE action = 'metadata-compaction'")
    op.execute(
        "UPDATE tbl SET enabled_actions = array_remove(enabled_actions, 'metadata-compaction')"
    )
    op.execute("ALTER TYPE action RENAME TO action_old")
    op.execute("CREATE TYPE action AS ENUM ('compaction', 'clustering', 'clean', 'indexing')")
    op.execute("ALTER TABLE tbl ALTER COLUMN enabled_actions DROP DEFAULT")
    op.execute(
        "ALTER TABLE tbl ALTER COLUMN enabled_actions TYPE action[] "
        "USING enabled_actions::text[]::action[]"
    )
    op.execute(
        "ALTER TABLE tbl ALTER COLUMN enabled_actions SET DEFAULT '{compaction,clean}'::action[]"
    )
    op.execute("ALTER TABLE operation ALTER COLUMN action TYPE action USING action::text::action")
    op.execute("DROP TYPE action_old")
