"""The executor of an operation: who was asked to run its plans, and who did.

`executor` is the choice the operation was created with (`auto`, `native` or `hudi`: the
submit's, else its table policy's, else the installation's); `executed_by` is the executor
its job reported having run (`native` or `hudi`), and `native_declined` why the native one
declined the table when `auto` handed it to Hudi's code.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "operation", sa.Column("executor", sa.Text(), server_default="auto", nullable=False)
    )
    op.add_column("operation", sa.Column("executed_by", sa.Text(), nullable=True))
    op.add_column("operation", sa.Column("native_declined", sa.Text(), nullable=True))
    op.create_check_constraint(
        op.f("ck_operation_executor"), "operation", "executor IN ('auto', 'native', 'hudi')"
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_operation_executor"), "operation", type_="check")
    op.drop_column("operation", "native_declined")
    op.drop_column("operation", "executed_by")
    op.drop_column("operation", "executor")
