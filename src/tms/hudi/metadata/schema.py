"""The Avro schema of the metadata table's records, and the binary codec of one record.

Every value in the metadata table is one `HoodieMetadataRecord` (hudi-common's
`HoodieMetadata.avsc`) in Avro binary encoding, under the writer schema the file carries: base
HFiles in their file info (`schema`), log blocks in their SCHEMA header. Hudi writes that schema
with its five meta fields prepended (`HoodieAvroUtils.addMetadataFields`, even though the
metadata table does not populate them) and with `avro.java.string` markers; `avsc/` holds it
exactly as Hudi 1.1 writes it for table versions 8 and 9.

What Hudi 0.14/0.15 (table version 6) write differs: no `SecondaryIndexMetadata`, no
`position` in the record index payload, no `isTightBound`/`valueType` in column stats and no
`LocalDateWrapper`/`ArrayWrapper` min/max branches. Readers need none of this: they decode with
the schema the file carries. A writer must write what the table's Hudi version reads, so for
table versions before 8 it takes the schema from the table's own metadata files
(`writer_schema`), never ours.

Values are decoded "raw": logical types are not applied (a decimal stays its bytes, a time its
long) and a union of records gives back `(record name, record)`, so decoding and encoding again
gives the same bytes.
"""

from __future__ import annotations

import functools
import io
import json
from importlib import resources
from typing import Any

import fastavro

from tms.hudi.errors import UnsupportedTableError

__all__ = [
    "FIRST_1X_TABLE_VERSION",
    "METADATA_RECORD_1X",
    "decode_record",
    "encode_record",
    "parsed_schema",
    "writer_schema",
]

FIRST_1X_TABLE_VERSION = 8
"""Table versions from here on are written by Hudi 1.x, whose schema we ship."""


@functools.cache
def _shipped() -> str:
    path = resources.files("tms.hudi.metadata").joinpath("avsc/HoodieMetadataRecord.avsc")
    return path.read_text(encoding="utf-8")


METADATA_RECORD_1X: str = _shipped()
"""`HoodieMetadataRecord` with meta fields, as Hudi 1.x writes it into files (JSON text)."""


def _raw(node: Any) -> Any:
    """The schema without logical types, so values keep their wire form."""
    if isinstance(node, list):
        return [_raw(branch) for branch in node]
    if not isinstance(node, dict):
        return node
    return {key: _raw(value) for key, value in node.items() if key != "logicalType"}


@functools.lru_cache(maxsize=16)
def parsed_schema(schema_text: str) -> Any:
    """fastavro's parse of a writer schema, logical types left out (cached per text)."""
    return fastavro.parse_schema(_raw(json.loads(schema_text)))


def decode_record(value: bytes, schema_text: str) -> dict[str, Any]:
    """One metadata record from Avro binary under `schema_text`, in raw form."""
    record = fastavro.schemaless_reader(
        io.BytesIO(value),
        parsed_schema(schema_text),
        None,
        return_record_name=True,
        return_record_name_override=True,
    )
    if not isinstance(record, dict):
        raise ValueError("a metadata table value is not an Avro record")
    return record


def encode_record(record: dict[str, Any], schema_text: str) -> bytes:
    """Avro binary of one metadata record (raw form) under `schema_text`."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed_schema(schema_text), record)
    return out.getvalue()


def schema_fields(schema_text: str) -> frozenset[str]:
    """Top-level field names of a writer schema."""
    return frozenset(f["name"] for f in json.loads(schema_text)["fields"])


def writer_schema(table_version: int, found: str | None) -> str:
    """The schema to write new records with: ours for 1.x tables, else the one the table's
    metadata files already carry (`found`); without one, refuse before anything is written."""
    if table_version >= FIRST_1X_TABLE_VERSION:
        return METADATA_RECORD_1X
    if found:
        return found
    raise UnsupportedTableError(
        f"table version {table_version}: no metadata file carries the writer schema of its "
        "Hudi version, and ours is Hudi 1.x's"
    )
