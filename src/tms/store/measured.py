"""A table's latest measurement as its policies read it, loaded by the same statement that
loads its counters (`store.commits.COUNTED` and the counting `UPDATE … RETURNING`): one
index lookup per table, no query of its own.

It travels as one JSON array (`[epoch seconds, layout, writes, services]`) so the raw
psycopg statement and the SQLAlchemy one read it alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ScalarSelect, func, select
from sqlalchemy.dialects.postgresql import JSONB

from tms.store.models import TableMeasurement, Tbl

__all__ = ["LATEST_MEASURED", "LATEST_MEASURED_SQL", "Measured", "measured_of"]


@dataclass(frozen=True)
class Measured:
    """The figures of a table's latest measurement with figures (status `measured`)."""

    measured_at: datetime
    layout: dict[str, Any] = field(default_factory=dict)
    writes: dict[str, Any] = field(default_factory=dict)
    services: dict[str, Any] = field(default_factory=dict)


def _latest() -> ScalarSelect[Any]:
    m = TableMeasurement
    return (
        select(
            func.jsonb_build_array(
                func.extract("epoch", m.measured_at),
                m.layout,
                m.writes,
                m.services,
                type_=JSONB,
            )
        )
        .where(m.tbl_id == Tbl.id, m.status == "measured")
        .order_by(m.measured_at.desc(), m.id.desc())
        .limit(1)
        .correlate(Tbl)
        .scalar_subquery()
    )


LATEST_MEASURED = _latest().label("latest_measured")
"""The column of `COUNTED` that `measured_of` reads."""

LATEST_MEASURED_SQL = """(SELECT jsonb_build_array(extract(epoch FROM m.measured_at), m.layout,
          m.writes, m.services) FROM table_measurement m
        WHERE m.tbl_id = tbl.id AND m.status = 'measured'
        ORDER BY m.measured_at DESC, m.id DESC LIMIT 1)"""
"""The same column in raw SQL, for a statement over `tbl`."""


def _object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def measured_of(value: Any) -> Measured | None:
    """The `Measured` of the column's value (None: the table has no measurement)."""
    if isinstance(value, str | bytes):
        value = json.loads(value)
    if not isinstance(value, list) or len(value) != 4:
        return None
    epoch, layout, writes, services = value
    if isinstance(epoch, str):
        epoch = float(epoch)
    if isinstance(epoch, bool) or not isinstance(epoch, int | float):
        return None
    at = datetime.fromtimestamp(float(epoch), UTC)
    return Measured(at, _object(layout), _object(writes), _object(services))
