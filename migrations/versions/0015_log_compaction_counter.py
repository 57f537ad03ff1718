"""`tbl.delta_commits_since_log_compaction`: the counter the log compaction policy watches.

A delta commit bumps it as it bumps `delta_commits_since_compaction`; a log compaction, and
a compaction (which leaves no log blocks to merge), restart it. Existing tables start at 0.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_CHECK = (
    "delta_commits_since_compaction >= 0 AND commits_since_clean >= 0 "
    "AND commits_since_clustering >= 0 AND commits_since_metadata_compaction >= 0"
)
_NEW_CHECK = _OLD_CHECK + " AND delta_commits_since_log_compaction >= 0"


def upgrade() -> None:
    op.add_column(
        "tbl",
        sa.Column(
            "delta_commits_since_log_compaction", sa.Integer(), server_default="0", nullable=False
        ),
    )
    op.drop_constraint(op.f("ck_tbl_counters"), "tbl", type_="check")
    op.create_check_constraint(op.f("ck_tbl_counters"), "tbl", _NEW_CHECK)


def downgrade() -> None:
    op.drop_constraint(op.f("ck_tbl_counters"), "tbl", type_="check")
    op.create_check_constraint(op.f("ck_tbl_counters"), "tbl", _OLD_CHECK)
    op.drop_column("tbl", "delta_commits_since_log_compaction")
