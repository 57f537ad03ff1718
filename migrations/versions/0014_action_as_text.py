"""Table service kinds are text: a new table service is not a migration.

The `action` enum type listed the table services, so each new one needed `ALTER TYPE … ADD
VALUE` (0004 for the metadata table's compaction). The columns become text, and the service
checks the values (`store.models.ActionText`); the enum type is dropped.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ACTIONS_0013 = ("compaction", "clustering", "clean", "metadata-compaction", "indexing")


def upgrade() -> None:
    op.execute("ALTER TABLE tbl ALTER COLUMN enabled_actions DROP DEFAULT")
    op.execute(
        "ALTER TABLE tbl ALTER COLUMN enabled_actions TYPE text[] USING enabled_actions::text[]"
    )
    op.execute(
        "ALTER TABLE tbl ALTER COLUMN enabled_actions SET DEFAULT '{compaction,clean}'::text[]"
    )
    op.execute("ALTER TABLE operation ALTER COLUMN action TYPE text USING action::text")
    op.execute("DROP TYPE action")


def downgrade() -> None:
    listed = ", ".join(f"'{action}'" for action in _ACTIONS_0013)
    op.execute(f"DELETE FROM operation WHERE action NOT IN ({listed})")
    op.execute(
        "UPDATE tbl SET enabled_actions = ARRAY(SELECT a FROM unnest(enabled_actions) AS a "
        f"WHERE a IN ({listed}))"
    )
    op.execute(f"CREATE TYPE action AS ENUM ({listed})")
    op.execute("ALTER TABLE tbl ALTER COLUMN enabled_actions DROP DEFAULT")
    op.execute(
        "ALTER TABLE tbl ALTER COLUMN enabled_actions TYPE action[] USING enabled_actions::action[]"
    )
    op.execute(
        "ALTER TABLE tbl ALTER COLUMN enabled_actions SET DEFAULT '{compaction,clean}'::action[]"
    )
    op.execute("ALTER TABLE operation ALTER COLUMN action TYPE action USING action::action")
