"""Normalize the base paths already stored, so every spelling of a table finds its row.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

Base paths are stored in one spelling (`tms.base_path`) from now on; rows registered
before were stored as given. When two rows are one table under two spellings, nothing is
changed and the upgrade stops, naming them: which one to keep (with its commits and
operations) is the operator's call (`DELETE /v1/tables/{id}` the other, then upgrade again).
A stored path that names no single location (relative, chained URL) is left as it is, with
a warning: no new request can reach it, and an operator can delete it.

The normalization is imported, not copied: it must be the one the service compares with.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from tms.base_path import BasePathError, normalize_base_path

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("alembic.runtime.migration")

TBL = sa.table(
    "tbl",
    sa.column("id", sa.BigInteger),
    sa.column("db_name", sa.String),
    sa.column("table_name", sa.String),
    sa.column("base_path", sa.String),
)


class BasePathCollision(RuntimeError):
    """Two registered tables are one location: the upgrade cannot choose between them."""


def upgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(TBL.c.id, TBL.c.db_name, TBL.c.table_name, TBL.c.base_path).order_by(TBL.c.id)
    ).all()
    by_path: dict[str, list[sa.Row[tuple[int, str, str, str]]]] = defaultdict(list)
    changes: dict[int, str] = {}
    for row in rows:
        try:
            normal = normalize_base_path(row.base_path)
        except BasePathError as exc:
            log.warning(
                "table %s (%s.%s): base path %r left as it is: it %s",
                row.id,
                row.db_name,
                row.table_name,
                row.base_path,
                exc,
            )
            continue
        by_path[normal].append(row)
        if normal != row.base_path:
            changes[row.id] = normal
    collisions = {path: group for path, group in by_path.items() if len(group) > 1}
    if collisions:
        lines = [
            f"  {path}: "
            + ", ".join(f"table {r.id} {r.db_name}.{r.table_name} ({r.base_path!r})" for r in group)
            for path, group in sorted(collisions.items())
        ]
        raise BasePathCollision(
            "these registered tables are one table under different spellings of its base path; "
            "delete all but one of each (DELETE /v1/tables/{id}) and upgrade again:\n"
            + "\n".join(lines)
        )
    for tbl_id, normal in changes.items():
        connection.execute(sa.update(TBL).where(TBL.c.id == tbl_id).values(base_path=normal))


def downgrade() -> None:
    """Nothing to undo: the normalized spellings name the same tables."""
