"""Read-back checks through an independent reader: PyPI `hudi` (hudi-rs), not our code."""

from __future__ import annotations

import pyarrow as pa

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)


def oracle_snapshot(base_path: str) -> pa.Table:
    """The snapshot hudi-rs reads: record key and data columns, sorted by record key."""
    from hudi import HudiTable

    batches = HudiTable(base_path).read()
    if not batches:
        return pa.table({})
    rows = pa.Table.from_batches(batches)
    keep = ["_hoodie_record_key"] + [c for c in rows.column_names if c not in META_COLUMNS]
    return rows.select(keep).sort_by("_hoodie_record_key")
