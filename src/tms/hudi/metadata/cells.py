"""Metadata records as the cells of an HFile, as Hudi's HFile writers store them: the record key
is the cell's row, and the value is the record's Avro binary with its `key` field empty (the
row holds the key; `HoodieAvroHFileWriter` blanks it).

A record index entry's value therefore depends on its location only: every key written to (or
indexed in) one file shares one value, encoded once (`location_value`), whether a build indexes
a file slice or a clustering moves records to a new file.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from operator import itemgetter

from tms.hudi.metadata.records import MetadataRecord, RecordLocation, record_index_record
from tms.hudi.metadata.schema import encode_record

__all__ = ["Cell", "cell_value", "location_record", "location_value", "record_cells"]

Cell = tuple[bytes, bytes]
"""An HFile cell of the metadata table: the key in UTF-8 and the encoded record."""


def cell_value(record: MetadataRecord, schema: str) -> bytes:
    """A record as a cell value under `schema`: the `key` field empty."""
    return encode_record({**record.fields, "key": ""}, schema)


def record_cells(records: Iterable[MetadataRecord], schema: str) -> list[Cell]:
    """The cells of `records`, sorted by key (UTF-8 bytes, as HFiles order rows)."""
    cells = [(record.key.encode("utf-8"), cell_value(record, schema)) for record in records]
    cells.sort(key=itemgetter(0))
    return cells


def location_record(key: str, location: RecordLocation) -> MetadataRecord:
    """The record index entry putting `key` at `location`: a UUID-shaped file id (with its
    index or none) as its halves, any other file id as the string."""
    try:
        return record_index_record(key, location)
    except ValueError:
        return record_index_record(key, location, raw_file_id=True)


@functools.lru_cache(maxsize=1024)
def location_value(location: RecordLocation, schema: str) -> bytes:
    """The cell value of every record index key at `location` (cached: a task asks once per
    file it wrote, a build once per file slice)."""
    return cell_value(location_record("", location), schema)
