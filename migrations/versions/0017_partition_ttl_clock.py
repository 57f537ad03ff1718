"""`tbl.last_partition_ttl_at`: the clock the partition TTL policy watches.

A partition TTL the policy creates sets it; the policy makes the next one due once its
interval has passed since then (partitions age with the clock, not with commits). Existing
tables have none: their first policy-made partition TTL is due at once.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "tbl", sa.Column("last_partition_ttl_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("tbl", "last_partition_ttl_at")
