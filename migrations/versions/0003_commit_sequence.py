"""Commit order: `commit.seq` and `operation.commit_seq` from one sequence, `commit_order`.

Drawn at insert (after the table's row lock), they order a table's commits and the
operations its triggers create by the transactions that stored them; `received_at` and
`created_at` are transaction start times and cannot. Rows that exist already get numbers
in the order of those times (ties: commits before operations, then by id).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEXT = sa.text("nextval('commit_order'::regclass)")


def upgrade() -> None:
    op.execute("CREATE SEQUENCE commit_order")
    op.add_column("commit", sa.Column("seq", sa.BigInteger(), nullable=True))
    op.add_column("operation", sa.Column("commit_seq", sa.BigInteger(), nullable=True))
    op.execute(
        """
        WITH ordered AS (
            SELECT kind, id, row_number() OVER (ORDER BY at, kind, id) AS n
            FROM (SELECT 0 AS kind, id, received_at AS at FROM commit
                  UNION ALL
                  SELECT 1 AS kind, id, created_at AS at FROM operation) AS rows
        ),
        commits AS (
            UPDATE commit c SET seq = o.n FROM ordered o WHERE o.kind = 0 AND c.id = o.id
        )
        UPDATE operation p SET commit_seq = o.n FROM ordered o WHERE o.kind = 1 AND p.id = o.id
        """
    )
    op.execute(
        "SELECT setval('commit_order', GREATEST("
        "(SELECT count(*) FROM commit) + (SELECT count(*) FROM operation), 1))"
    )
    for table, column in (("commit", "seq"), ("operation", "commit_seq")):
        op.alter_column(table, column, server_default=NEXT, nullable=False)


def downgrade() -> None:
    op.drop_column("operation", "commit_seq")
    op.drop_column("commit", "seq")
    op.execute("DROP SEQUENCE commit_order")
