"""`table_measurement`: what tms measures per table, kept over time; and the measurement
sweep's clock and lease on `tbl`.

A measurement is the layout of a table's latest file slices on storage, its write rate from
the stored commits and each table service's cost from its attempts (`tms.measure`,
`tms.store.measurements`). The sweep leases a table's row while it measures it
(`measure_lease_owner`, `measure_lease_expires_at`), as the pull fallback does, and
`last_measured_at` is its interval's clock. Existing tables have never been measured: they
are due at once.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tbl", sa.Column("last_measured_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("tbl", sa.Column("measure_lease_owner", sa.Text(), nullable=True))
    op.add_column(
        "tbl", sa.Column("measure_lease_expires_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_table(
        "table_measurement",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tbl_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "measured_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("layout", pg.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("writes", pg.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("services", pg.JSONB(astext_type=sa.Text()), nullable=True),
        sa.CheckConstraint(
            "status IN ('measured', 'skipped', 'failed')", name=op.f("ck_table_measurement_status")
        ),
        sa.ForeignKeyConstraint(["tbl_id"], ["tbl.id"], name="fk_table_measurement_tbl_id_tbl"),
        sa.PrimaryKeyConstraint("id", name="pk_table_measurement"),
    )
    op.create_index(
        "ix_table_measurement_tbl_id_measured_at", "table_measurement", ["tbl_id", "measured_at"]
    )


def downgrade() -> None:
    op.drop_table("table_measurement")
    op.drop_column("tbl", "measure_lease_expires_at")
    op.drop_column("tbl", "measure_lease_owner")
    op.drop_column("tbl", "last_measured_at")
