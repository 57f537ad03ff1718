"""A base file written part by part: small parts make row groups of the stated size, not one
row group each, and the file holds every row in order with its key range in the footer."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tms.hudi.files.data import BaseFileWriter
from tms.hudi.meta_fields import RECORD_KEY
from tms.hudi.storage import Storage


def test_small_parts_are_written_as_row_groups_of_the_stated_size(tmp_path: Path) -> None:
    parts = [
        pa.table({RECORD_KEY: [f"k{n:03d}-{i:04d}" for i in range(1000)], "v": list(range(1000))})
        for n in range(100)
    ]
    part_bytes = parts[0].nbytes
    writer = BaseFileWriter(
        Storage(str(tmp_path)),
        "p/f.parquet",
        str(tmp_path / "local.parquet"),
        parts[0].schema,
        row_group_bytes=10 * part_bytes,
    )
    for part in parts:
        writer.write(part)
    size = writer.close()

    written = pq.ParquetFile(tmp_path / "p" / "f.parquet")
    assert written.metadata.num_row_groups == 10  # not one per part
    assert {written.metadata.row_group(i).num_rows for i in range(10)} == {10_000}
    assert written.read().equals(pa.concat_tables(parts))
    footer = written.metadata.metadata
    assert footer[b"hoodie_min_record_key"] == b"k000-0000"
    assert footer[b"hoodie_max_record_key"] == b"k099-0999"
    assert size == (tmp_path / "p" / "f.parquet").stat().st_size
