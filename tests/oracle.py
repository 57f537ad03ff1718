"""The independent reader: PyPI `hudi` (hudi-rs). Every table we write or change is read back
through it, never through our own code."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from hudi import HudiTable as OracleTable
from tms.hudi.meta_fields import META_FIELDS, RECORD_KEY


def snapshot(base_path: str) -> pa.Table:
    """The oracle's snapshot: record key and data columns, sorted by record key."""
    table = OracleTable(base_path)
    batches = table.read()
    if not batches:
        return pa.table({})
    rows = pa.Table.from_batches(batches)
    keep = [RECORD_KEY] + [c for c in rows.column_names if c not in META_FIELDS]
    return rows.select(keep).sort_by(RECORD_KEY)


def rows_by_key(base_path: str) -> dict[str, dict[str, Any]]:
    return {row.pop(RECORD_KEY): row for row in snapshot(base_path).to_pylist()}


def file_slices(base_path: str) -> list[dict[str, Any]]:
    """Latest file slices as the oracle sees them, sorted by partition and file id."""
    slices = OracleTable(base_path).get_file_slices()
    return sorted(
        (
            {
                "partition": s.partition_path,
                "file_id": s.file_id,
                "base_instant": s.creation_instant_time,
                "base_file": s.base_file_name,
                "log_files": list(s.log_file_names),
            }
            for s in slices
        ),
        key=lambda s: (s["partition"], s["file_id"]),
    )


def completed_instants(base_path: str) -> list[tuple[str, str]]:
    """(instant time, action) of completed commits, delta commits and replace commits."""
    timeline = OracleTable(base_path).get_timeline()
    instants = (
        list(timeline.get_completed_commits())
        + list(timeline.get_completed_deltacommits())
        + list(timeline.get_completed_replacecommits())
    )
    return sorted((i.timestamp, i.action) for i in instants)
