"""Read-back checks through an independent reader: PyPI `hudi` (hudi-rs), not our code."""

from __future__ import annotations

import pyarrow as pa

from tms.hudi.meta_fields import META_FIELDS, RECORD_KEY


def oracle_snapshot(base_path: str, options: dict[str, str] | None = None) -> pa.Table:
    """The snapshot hudi-rs reads (with its storage `options`: `aws_endpoint_url`, ...):
    record key and data columns, sorted by record key."""
    from hudi import HudiTable

    batches = HudiTable(base_path, options).read()
    if not batches:
        return pa.table({})
    rows = pa.Table.from_batches(batches)
    keep = [RECORD_KEY] + [c for c in rows.column_names if c not in META_FIELDS]
    return rows.select(keep).sort_by(RECORD_KEY)
