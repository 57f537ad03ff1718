"""`tbl.commits_since_archival`: the counter the archival policy watches.

Every write bumps it as it bumps `commits_since_clean`; an archival the policy creates
restarts it (archival leaves no instant on the timeline to recount from). Existing tables
start at 0.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_CHECK = (
    "delta_commits_since_compaction >= 0 AND commits_since_clean >= 0 "
    "AND commits_since_clustering >= 0 AND commits_since_metadata_compaction >= 0 "
    "AND delta_commits_since_log_compaction >= 0"
)
_NEW_CHECK = _OLD_CHECK + " AND commits_since_archival >= 0"


def upgrade() -> None:
    op.add_column(
        "tbl",
        sa.Column("commits_since_archival", sa.Integer(), server_default="0", nullable=False),
    )
    op.drop_constraint(op.f("ck_tbl_counters"), "tbl", type_="check")
    op.create_check_constraint(op.f("ck_tbl_counters"), "tbl", _NEW_CHECK)


def downgrade() -> None:
    op.drop_constraint(op.f("ck_tbl_counters"), "tbl", type_="check")
    op.create_check_constraint(op.f("ck_tbl_counters"), "tbl", _OLD_CHECK)
    op.drop_column("tbl", "commits_since_archival")
