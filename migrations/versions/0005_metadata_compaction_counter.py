"""`tbl.commits_since_metadata_compaction`: the counter the metadata compaction policy watches.

Every stored commit of a data table (writes and table services alike) makes one delta commit
on its metadata table, so the counter is bumped by each of them. Existing tables start at 0.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_CHECK = (
    "delta_commits_since_compaction >= 0 AND commits_since_clean >= 0 "
    "AND commits_since_clustering >= 0"
)
_NEW_CHECK = _OLD_CHECK + " AND commits_since_metadata_compaction >= 0"


def upgrade() -> None:
    op.add_column(
        "tbl",
        sa.Column(
            "commits_since_metadata_compaction", sa.Integer(), server_default="0", nullable=False
        ),
    )
    op.drop_constraint(op.f("ck_tbl_counters"), "tbl", type_="check")
    op.create_check_constraint(op.f("ck_tbl_counters"), "tbl", _NEW_CHECK)


def downgrade() -> None:
    op.drop_constraint(op.f("ck_tbl_counters"), "tbl", type_="check")
    op.create_check_constraint(op.f("ck_tbl_counters"), "tbl", _OLD_CHECK)
    op.drop_column("tbl", "commits_since_metadata_compaction")
